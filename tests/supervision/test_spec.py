"""ChildSpec, SupFlags and the supervisor errors.

Modelled on OTP supervisor_SUITE's ``sup_flags``, ``child_specs`` and
``child_specs_map`` cases: every bad field is rejected with an error that
names the field and the value, and the defaults are OTP's.
"""

from __future__ import annotations

import pickle

import pytest

from actors.global_names import GlobalName
from supervision._spec import ChildSpec, SupFlags, check_childspecs, check_startspec
from supervision.errors import (
    AlreadyPresent,
    AlreadyStarted,
    InvalidChildSpec,
    InvalidSupFlags,
    NotFound,
    Restarting,
    Running,
    SimpleOneForOne,
    StartError,
    SupervisorError,
)

pytestmark = pytest.mark.timeout(10)


class Worker:
    def __init__(self, *args: object, **kwargs: object) -> None:
        self.args = args
        self.kwargs = kwargs


def spec(**fields: object) -> ChildSpec:
    base: dict[str, object] = {"id": "c", "start": (Worker, ())}
    base.update(fields)
    return ChildSpec(**base)  # type: ignore[arg-type]


# --- ChildSpec defaults -----------------------------------------------------


def test_child_spec_defaults_are_otps() -> None:
    child = spec()
    assert child.restart == "permanent"
    assert child.shutdown == 5.0
    assert child.type == "worker"
    assert child.host is None
    assert child.cpus is None
    assert child.significant is False


def test_supervisor_child_shutdown_defaults_to_infinity() -> None:
    assert spec(type="supervisor").shutdown == "infinity"


def test_explicit_shutdown_kept_for_supervisor_child() -> None:
    assert spec(type="supervisor", shutdown=2).shutdown == 2
    assert spec(type="supervisor", shutdown="brutal_kill").shutdown == "brutal_kill"


def test_start_forms_and_accessors() -> None:
    child = spec(start=(Worker, [1, 2]))
    assert child.start == (Worker, (1, 2))
    assert child.start_class is Worker
    assert child.start_args == (1, 2)
    assert child.start_kwargs == {}
    with_kwargs = spec(start=(Worker, (1,), {"x": 2}))
    assert with_kwargs.start_kwargs == {"x": 2}
    with_kwargs.start_kwargs["y"] = 3
    assert with_kwargs.start_kwargs == {"x": 2}


def test_with_args_appends_like_simple_one_for_one_start_child() -> None:
    template = spec(start=(Worker, ("a",), {"k": 1}))
    child = template.with_args(("b", "c"))
    assert child.start == (Worker, ("a", "b", "c"), {"k": 1})
    assert template.start_args == ("a",)


def test_cpus_normalised_to_frozenset() -> None:
    assert spec(cpus={0, 2}).cpus == frozenset({0, 2})
    assert spec(cpus=[3]).cpus == frozenset({3})


def test_spec_is_frozen_hashable_and_picklable() -> None:
    child = spec(start=(Worker, ([1],)), cpus={1}, host="h1")
    with pytest.raises(AttributeError):
        child.restart = "temporary"  # type: ignore[misc]
    assert hash(child) == hash("c")
    assert pickle.loads(pickle.dumps(child)) == child


# --- ChildSpec validation: every error names the field and the value ---------


@pytest.mark.parametrize(
    "fields, field, shown",
    [
        ({"id": None}, "id", "None"),
        ({"id": ["x"]}, "id", "['x']"),
        ({"start": Worker}, "start", "Worker"),
        ({"start": (Worker,)}, "start", "Worker"),
        ({"start": ("not callable", ())}, "start", "'not callable'"),
        ({"start": (Worker, "abc")}, "start", "'abc'"),
        ({"start": (Worker, (), [1])}, "start", "[1]"),
        ({"restart": "sometimes"}, "restart", "'sometimes'"),
        ({"type": "manager"}, "type", "'manager'"),
        ({"shutdown": -1}, "shutdown", "-1"),
        ({"shutdown": "soon"}, "shutdown", "'soon'"),
        ({"shutdown": True}, "shutdown", "True"),
        ({"shutdown": float("nan")}, "shutdown", "nan"),
        ({"shutdown": float("inf")}, "shutdown", "inf"),
        ({"host": 3}, "host", "3"),
        ({"cpus": set()}, "cpus", "set()"),
        ({"cpus": {-1}}, "cpus", "{-1}"),
        ({"cpus": {True}}, "cpus", "{True}"),
        ({"cpus": "01"}, "cpus", "'01'"),
        ({"cpus": 3}, "cpus", "3"),
        ({"significant": "yes"}, "significant", "'yes'"),
    ],
)
def test_child_specs_bad_field_named(fields: dict[str, object], field: str, shown: str) -> None:
    with pytest.raises(InvalidChildSpec) as info:
        spec(**fields)
    assert info.value.field == field
    assert str(info.value).startswith(f"ChildSpec {field}: ")
    assert shown in str(info.value)
    assert isinstance(info.value, ValueError)


def test_bad_restart_message_is_exact() -> None:
    with pytest.raises(InvalidChildSpec) as info:
        spec(restart="sometimes")
    assert str(info.value) == ("ChildSpec restart: 'sometimes' is not one of permanent, transient, temporary")


def test_shutdown_zero_allowed_as_in_otp() -> None:
    assert spec(shutdown=0).shutdown == 0


def test_significant_permanent_is_bad_combination() -> None:
    with pytest.raises(InvalidChildSpec) as info:
        spec(significant=True)
    assert info.value.field == "significant"
    assert "permanent" in str(info.value)
    assert spec(significant=True, restart="transient").significant
    assert spec(significant=True, restart="temporary").significant


# --- from_map / tuples -------------------------------------------------------


def test_child_specs_map() -> None:
    child = ChildSpec.from_map({"id": "m", "start": (Worker, (1,)), "restart": "transient", "type": "supervisor"})
    assert child == ChildSpec("m", (Worker, (1,)), restart="transient", type="supervisor")
    assert child.shutdown == "infinity"
    assert ChildSpec.from_map(child) is child
    assert ChildSpec.from_map(child.to_map()) == child


def test_child_specs_map_missing_and_unknown_keys() -> None:
    with pytest.raises(InvalidChildSpec) as info:
        ChildSpec.from_map({"start": (Worker, ())})
    assert info.value.field == "id"
    with pytest.raises(InvalidChildSpec) as info:
        ChildSpec.from_map({"id": 1})
    assert info.value.field == "start"
    with pytest.raises(InvalidChildSpec) as info:
        ChildSpec.from_map({"id": 1, "start": (Worker, ()), "colour": "red"})
    assert info.value.field == "key"
    assert "'colour'" in str(info.value)


def test_child_specs_old_tuple_format() -> None:
    child = ChildSpec.from_map(("t", (Worker, ()), "temporary", "brutal_kill", "worker"))
    assert child == ChildSpec("t", (Worker, ()), restart="temporary", shutdown="brutal_kill")
    with pytest.raises(InvalidChildSpec) as info:
        ChildSpec.from_map(("t", (Worker, ())))
    assert info.value.field == "spec"


# --- SupFlags ---------------------------------------------------------------


def test_sup_flags_defaults() -> None:
    flags = SupFlags()
    assert flags == SupFlags("one_for_one", 1, 5, "never")
    assert SupFlags.from_map({}) == flags
    assert SupFlags.from_map(flags) is flags
    assert SupFlags.from_map(("rest_for_one", 3, 10)) == SupFlags("rest_for_one", 3, 10)
    assert SupFlags.from_map(flags.to_map()) == flags
    assert SupFlags(period=0.5).period == 0.5


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"strategy": "one_for_some"}, "strategy"),
        ({"intensity": -1}, "intensity"),
        ({"intensity": 1.5}, "intensity"),
        ({"intensity": True}, "intensity"),
        ({"period": 0}, "period"),
        ({"period": -2}, "period"),
        ({"period": "5"}, "period"),
        ({"period": float("inf")}, "period"),
        ({"auto_shutdown": "sometimes"}, "auto_shutdown"),
    ],
)
def test_sup_flags_bad_field_named(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidSupFlags) as info:
        SupFlags(**fields)  # type: ignore[arg-type]
    assert info.value.field == field
    assert str(info.value).startswith(f"SupFlags {field}: {fields[field]!r}")


def test_sup_flags_from_map_rejects_unknown_and_bad_shapes() -> None:
    with pytest.raises(InvalidSupFlags) as info:
        SupFlags.from_map({"strategy": "one_for_one", "max_r": 3})
    assert info.value.field == "key"
    with pytest.raises(InvalidSupFlags) as info:
        SupFlags.from_map(("one_for_one", 1))
    assert info.value.field == "flags"


# --- checks across specs -------------------------------------------------------


def test_check_childspecs_converts_and_keeps_order() -> None:
    specs = check_childspecs([{"id": "a", "start": (Worker, ())}, ChildSpec("b", (Worker, ()))])
    assert [child.id for child in specs] == ["a", "b"]


def test_check_childspecs_duplicate_id() -> None:
    with pytest.raises(InvalidChildSpec) as info:
        check_childspecs([spec(id="a"), spec(id="a")])
    assert info.value.field == "id"
    assert info.value.value == "a"


def test_significant_with_auto_shutdown_never_rejected() -> None:
    significant = spec(restart="transient", significant=True)
    with pytest.raises(InvalidChildSpec) as info:
        check_childspecs([significant], "never")
    assert info.value.field == "significant"
    assert "never" in str(info.value)
    assert check_childspecs([significant], "any_significant") == (significant,)


def test_check_startspec_simple_one_for_one_needs_one_template() -> None:
    flags, children = check_startspec({"strategy": "simple_one_for_one"}, [spec()])
    assert flags.strategy == "simple_one_for_one"
    assert children == (spec(),)
    for wrong in ([], [spec(id="a"), spec(id="b")]):
        with pytest.raises(InvalidChildSpec) as info:
            check_startspec(SupFlags("simple_one_for_one"), wrong)
        assert info.value.field == "children"


def test_check_startspec_uses_flags_auto_shutdown() -> None:
    significant = spec(restart="temporary", significant=True)
    flags, children = check_startspec(SupFlags(auto_shutdown="all_significant"), [significant])
    assert children == (significant,)
    with pytest.raises(InvalidChildSpec):
        check_startspec(SupFlags(), [significant])


# --- errors -----------------------------------------------------------------

ERRORS = [
    AlreadyStarted("ref-1", "c"),
    AlreadyStarted("ref-2"),
    AlreadyPresent("c"),
    Running("c"),
    Restarting("c"),
    NotFound("c"),
    SimpleOneForOne("delete_child"),
    StartError("c", ("bad", 1)),
    InvalidChildSpec("restart", "sometimes", "is not one of permanent, transient, temporary"),
    InvalidSupFlags("period", 0, "is not a number of seconds > 0"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_pickle_with_attributes(error: SupervisorError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert copy == error
    assert str(copy) == str(error)
    assert vars(copy) == vars(error)
    assert isinstance(copy, SupervisorError)


def test_error_messages_name_child_and_reason() -> None:
    assert str(StartError("db", "eaccess")) == "failed to start child 'db': 'eaccess'"
    assert str(NotFound("x")) == "child 'x' not found"
    assert isinstance(NotFound("x"), LookupError)
    assert str(AlreadyStarted("ref-1", "c")) == "child 'c' already started: 'ref-1'"
    assert "simple_one_for_one" in str(SimpleOneForOne("restart_child"))
    assert AlreadyStarted("ref-1").ref == "ref-1"
    assert StartError("c", 1) != StartError("c", 2)


def test_a_child_may_be_named_cluster_wide() -> None:
    spec = ChildSpec("solo", (object, ()), name=GlobalName("solo"), node=["b", "c"])
    assert spec.name == GlobalName("solo") and spec.to_map()["name"] == GlobalName("solo")
    assert pickle.loads(pickle.dumps(spec)).name == GlobalName("solo")
    with pytest.raises(InvalidChildSpec) as info:
        ChildSpec("solo", (object, ()), name=GlobalName(""))
    assert info.value.field == "name"
    with pytest.raises(InvalidChildSpec):
        ChildSpec("solo", (object, ()), name=("solo",))  # a plain tuple is not a GlobalName
