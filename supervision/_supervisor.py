"""The supervisor behaviour: a gen_server that carries out the pure policy.

Every decision (restart or not, what a strategy stops and starts, when the
intensity is exceeded) is made in `supervision._policy`; this module only
keeps the children's state, starts them with ``spawn_link``, stops them with
OTP's shutdown protocol and reports what it did.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any, Sequence

from actors import ActorRef, AlreadyRegistered, Exit, GenServer, SpawnError, global_names, ignore, is_normal_exit
from actors.clock import MonotonicClock
from actors.sys import SysError
from supervision._children import Child, ChildInfo, count_children, which_children
from supervision._policy import (
    RESTARTING,
    RUNNING,
    STOPPED,
    ChildRecord,
    add_restart,
    decide_exit,
    decide_restart,
    should_auto_shutdown,
    should_restart,
)
from supervision._reports import RESTARTS_BY_CHILD, Reports, status_snapshot
from supervision._shutdown import stop_refs
from supervision._spec import ChildSpec, check_childspecs, check_startspec
from supervision.errors import (
    AlreadyPresent,
    AlreadyStarted,
    NotFound,
    Restarting,
    Running,
    SimpleOneForOne,
    StartError,
    SupervisorError,
)

__all__ = ["RESTARTS_BY_CHILD", "Supervisor"]

log = logging.getLogger("supervision")

_TRY_AGAIN = "$supervisor_try_again_restart"


class Supervisor(GenServer):
    """Subclass and make ``init(*args)`` return ``(flags, children)``.

    ``flags`` is a `SupFlags` (or its map form), ``children`` a list of
    `ChildSpec` (or their map forms).  Children start in order, synchronously,
    before ``spawn`` returns; a failure stops those already started and makes
    the start fail naming the child and the reason.
    """

    clock = MonotonicClock()

    # -- start -------------------------------------------------------------------

    def _gen_init(self, *args: Any, **kwargs: Any) -> Any:
        self._reports = Reports()
        result = self.init(*args, **kwargs)
        if result is ignore:
            return ignore
        try:
            flags, specs = result
        except (TypeError, ValueError):
            raise Exit(("bad_return", result), "Supervisor.init must return (flags, children)") from None
        self.flags, checked = check_startspec(flags, specs)
        self.trap_exit = True
        self._children: list[Child] = []
        self._dynamic: dict[ActorRef, Child] = {}
        self._restarts: tuple[float, ...] = ()
        self._template: ChildSpec | None = None
        self._dynamic_restarting: dict[int, Child] = {}
        self._tokens = itertools.count(1)
        for spec in checked:
            self._reports.child_counter(self._label(), spec.id)
        if self.flags.strategy == "simple_one_for_one":
            self._template = checked[0]
            return None
        for spec in checked:
            child = Child(spec)
            self._children.append(child)
            try:
                self._start(child)
            except SpawnError as exc:
                self._children.remove(child)
                self._report("start_error", spec.id, exc.reason, "start failed")
                self._terminate_all()
                raise Exit(("shutdown", ("failed_to_start_child", spec.id, exc.reason))) from None
            if child.status == STOPPED and spec.restart == "temporary":
                self._children.remove(child)
        return None

    def _start(self, child: Child) -> ActorRef | None:
        spec = child.spec
        cls, name = spec.start_class, spec.name
        if isinstance(name, global_names.GlobalName):
            # Registered by the child itself before its init, as {global, Name}.
            cls, name = global_names.named(cls, name.name), None
        ref = self.spawn_link(
            cls,
            *spec.start_args,
            name=name,
            host=spec.host,
            cpus=spec.cpus,
            kwargs=spec.start_kwargs,
            node=spec.node,
            mailbox=spec.mailbox,
            overflow=spec.overflow,
            thread=spec.thread,
        )
        child.ref = ref
        child.status = RUNNING if ref is not None else STOPPED
        child.starts += 1
        return ref

    # -- requests ----------------------------------------------------------------------

    def handle_call(self, request: Any, from_: Any) -> Any:
        op, *args = request
        try:
            handler = getattr(self, f"_call_{op}")
        except AttributeError:
            raise Exit(("unexpected_call", request)) from None
        try:
            return ("ok", handler(*args))
        except SupervisorError as exc:
            return ("error", exc)

    def _call_which_children(self) -> list[ChildInfo]:
        return which_children(self._all_children(), dynamic=self._template is not None)

    def _call_count_children(self) -> dict[str, int]:
        return count_children(self._all_children(), dynamic=self._template is not None)

    def _call_get_childspec(self, key: Any) -> ChildSpec:
        if self._template is not None:
            # OTP ``find_child``: a child's pid, the pid of one being
            # restarted or of a dead process give the template; so does the
            # template's own id.  A live stranger's pid is not found.
            if isinstance(key, ActorRef):
                if self._dynamic_child(key) is not None or not key.is_alive():
                    return self._template
                raise NotFound(key)
            if key == self._template.id:
                return self._template
            raise NotFound(key)
        return self._find(key).spec

    def _call_start_child(self, arg: Any) -> ActorRef | None:
        if self._template is not None:
            extra = tuple(arg) if isinstance(arg, (list, tuple)) else (arg,)
            child = Child(self._template.with_args(extra))
            try:
                ref = self._start(child)
            except AlreadyRegistered as exc:
                raise AlreadyStarted(exc.reason[1]) from None
            except SpawnError as exc:
                raise StartError(None, exc.reason) from None
            if ref is not None:
                self._dynamic[ref] = child
            return ref
        # OTP ``check_childspec(Spec, AutoShutdown)``: a significant child is
        # refused (bad_combination) by a supervisor whose auto_shutdown is never.
        (spec,) = check_childspecs([arg], self.flags.auto_shutdown)
        existing = self._lookup(spec.id)
        if existing is not None:
            if existing.status == RUNNING:
                raise AlreadyStarted(existing.ref, spec.id)
            raise AlreadyPresent(spec.id)
        child = Child(spec)
        self._children.append(child)
        try:
            ref = self._start(child)
        except AlreadyRegistered as exc:
            # OTP passes a start function's {error, {already_started, Pid}} on as it is.
            self._children.remove(child)
            raise AlreadyStarted(exc.reason[1], spec.id) from None
        except SpawnError as exc:
            self._children.remove(child)
            raise StartError(spec.id, exc.reason) from None
        if ref is None and spec.restart == "temporary":
            self._children.remove(child)
        return ref

    def _call_terminate_child(self, key: Any) -> None:
        if self._template is not None:
            # OTP: a simple_one_for_one child is terminated by its pid only;
            # any other key is ``{error, simple_one_for_one}``, the pid of a
            # live process that is not a child ``{error, not_found}``.
            if not isinstance(key, ActorRef):
                raise SimpleOneForOne("terminate_child")
            child = self._dynamic.pop(key, None)
            if child is not None:
                self._shutdown(child)
                return None
            token = next((t for t, c in self._dynamic_restarting.items() if c.ref == key), None)
            if token is not None:
                # Being restarted: forgetting it ends the retries (OTP erases
                # the {restarting, Pid} entry; the pending retry finds nothing).
                del self._dynamic_restarting[token]
                return None
            if key.is_alive():
                raise NotFound(key)  # alive, but not a child of this supervisor
            return None  # OTP: the pid of a dead process is "terminated": ok
        child = self._find(key)
        self._shutdown(child)
        if child.spec.restart == "temporary":
            self._children.remove(child)
        return None

    def _call_restart_child(self, key: Any) -> ActorRef | None:
        if self._template is not None:
            raise SimpleOneForOne("restart_child")
        child = self._find(key)
        if child.status == RUNNING:
            raise Running(key)
        if child.status == RESTARTING:
            raise Restarting(key)
        try:
            return self._start(child)
        except SpawnError as exc:
            raise StartError(key, exc.reason) from None

    def _call_delete_child(self, key: Any) -> None:
        if self._template is not None:
            raise SimpleOneForOne("delete_child")
        child = self._find(key)
        if child.status == RUNNING:
            raise Running(key)
        if child.status == RESTARTING:
            raise Restarting(key)
        self._children.remove(child)
        return None

    # -- children dying ------------------------------------------------------------

    def handle_info(self, message: Any) -> Any:
        if isinstance(message, tuple) and len(message) == 3 and message[0] == "EXIT":
            _tag, ref, reason = message
            self._child_exited(ref, reason)
        else:
            log.warning("supervisor %s got unexpected message %r", self._label(), message)
        return None

    def handle_cast(self, request: Any) -> Any:
        if isinstance(request, tuple) and request[0] == _TRY_AGAIN and self._template is not None:
            child = self._dynamic_restarting.pop(request[1][1], None)
            if child is not None:
                ok, self._restarts = add_restart(
                    self._restarts, self.clock.now(), self.flags.intensity, self.flags.period
                )
                if not ok:
                    self._give_up()
                    return None
                self._restart_dynamic(child)
            return None
        if isinstance(request, tuple) and request[0] == _TRY_AGAIN:
            child = self._lookup(request[1])
            if child is not None and child.status == RESTARTING:
                decision = decide_restart(self.flags, self._records(), child.spec.id, self._restarts, self.clock.now())
                self._restarts = decision.restarts
                self._carry_out(child, decision)
            return None
        raise Exit(("unexpected_cast", request))

    def _child_exited(self, ref: ActorRef | None, reason: Any) -> None:
        if ref is None:
            return
        if self._template is not None:
            child = self._dynamic.get(ref)
            if child is None:
                return
            child.last_exit = reason
            if not should_restart(child.spec.restart, reason):
                del self._dynamic[ref]
                if not _normal(reason):
                    self._report("child_terminated", None, reason, "not restarted", ref=ref)
                # OTP do_auto_shutdown: all_significant waits for the last child.
                others = [c.record() for c in self._all_children()]
                if should_auto_shutdown(self.flags.auto_shutdown, child.record(), others):
                    self._auto_shutdown(None)
                return
            self._report("child_terminated", None, reason, "restarting", ref=ref)
            ok, self._restarts = add_restart(self._restarts, self.clock.now(), self.flags.intensity, self.flags.period)
            del self._dynamic[ref]
            if not ok:
                self._give_up()
                return
            self._restart_dynamic(child)
            return
        child = next((c for c in self._children if c.ref == ref and c.status == RUNNING), None)
        if child is None:
            return  # a stale EXIT from a child already stopped or replaced
        child.status = STOPPED
        child.ref = None
        child.last_exit = reason
        records = self._records()
        decision = decide_exit(self.flags, records, child.spec.id, reason, self._restarts, self.clock.now())
        self._restarts = decision.restarts
        if decision.log_error:
            action = "restarting" if decision.plan else ("shutting down" if decision.shutdown else "not restarted")
            self._report("child_terminated", child.spec.id, reason, action, ref=ref)
        self._carry_out(child, decision)

    def _restart_dynamic(self, child: Child) -> None:
        """Restart a simple_one_for_one child; a failure is retried through the
        mailbox (OTP ``try_again_restart``), each retry counting toward intensity."""
        try:
            new = self._start(child)
        except SpawnError as exc:
            child.status = RESTARTING
            token = next(self._tokens)
            self._dynamic_restarting[token] = child
            self._report("start_error", None, exc.reason, "will retry")
            self.ref.cast((_TRY_AGAIN, ("$dynamic", token)))
            return
        if new is not None:
            self._dynamic[new] = child

    def _carry_out(self, child: Child, decision: Any) -> None:
        if decision.drop_exited and child in self._children:
            self._children.remove(child)
        if decision.shutdown is not None:
            if decision.shutdown == "reached_max_restart_intensity":
                self._give_up()
            else:
                self._auto_shutdown(child.spec.id)
            return
        plan = decision.plan
        if plan is None:
            return
        for cid in plan.terminate:
            target = self._lookup(cid)
            if target is not None:
                self._shutdown(target)
        for cid in plan.drop:
            target = self._lookup(cid)
            if target is not None:
                self._children.remove(target)
        for cid in plan.start:
            target = self._lookup(cid)
            if target is None:
                continue
            try:
                self._start(target)
            except SpawnError as exc:
                target.status = RESTARTING
                self._report("start_error", cid, exc.reason, "will retry")
                self.ref.cast((_TRY_AGAIN, cid))
                return

    def _auto_shutdown(self, child_id: Any) -> None:
        self._report("auto_shutdown", child_id, "shutdown", "shutting down", level=logging.INFO)
        self._terminate_all()
        self.stop("shutdown")

    def _give_up(self) -> None:
        self._report("shutdown", None, "reached_max_restart_intensity", "shutting down")
        self._terminate_all()
        self.stop("shutdown")

    # -- stopping children ------------------------------------------------------------

    def terminate(self, reason: Any) -> None:
        if hasattr(self, "_children"):
            self._terminate_all()

    def _terminate_all(self) -> None:
        if self._template is not None:
            children = list(self._dynamic.values())
            self._dynamic.clear()
            self._shutdown_many(children)
            return
        for child in reversed(list(self._children)):
            if child.status == RUNNING:
                self._shutdown(child)
            child.status = STOPPED

    def _shutdown(self, child: Child) -> None:
        """OTP ``shutdown/2``: unlink, ask politely, wait, then kill."""
        ref = child.ref
        child.ref = None
        child.status = STOPPED
        if ref is None:
            return
        stop_refs(self, [ref], child.spec.shutdown, child.spec.id)

    def _shutdown_many(self, children: Sequence[Child]) -> None:
        refs = [c.ref for c in children if c.ref is not None]
        for c in children:
            c.ref = None
            c.status = STOPPED
        if refs and self._template is not None:
            stop_refs(self, refs, self._template.shutdown, None)

    # -- helpers -------------------------------------------------------------------------

    def _all_children(self) -> list[Child]:
        if self._template is not None:
            return list(self._dynamic.values()) + list(self._dynamic_restarting.values())
        return list(self._children)

    def _records(self) -> list[ChildRecord]:
        return [c.record() for c in self._children]

    def _dynamic_child(self, ref: ActorRef) -> Child | None:
        """A simple_one_for_one child by its ref, running or being restarted."""
        child = self._dynamic.get(ref)
        if child is None:
            child = next((c for c in self._dynamic_restarting.values() if c.ref == ref), None)
        return child

    def _lookup(self, child_id: Any) -> Child | None:
        return next((c for c in self._children if c.spec.id == child_id), None)

    def _find(self, child_id: Any) -> Child:
        child = self._lookup(child_id)
        if child is None:
            raise NotFound(child_id)
        return child

    def _label(self) -> str:
        cell = self._actor_cell
        return cell.name or cell.id

    # -- system messages (`actors.sys`) ---------------------------------------------

    def system_get_state(self) -> Any:
        """What `actors.sys.get_state` shows: the flags and the children (`which_children`)."""
        return {"flags": self.flags, "children": self._call_which_children()}

    def system_replace_state(self, fun: Any) -> Any:
        """Refused.  A supervisor's state is its record of live processes it
        started and is linked to, with their restart history: a state put in
        from outside would make it restart, stop or lose track of the wrong
        processes.  Change a tree with `start_child`, `terminate_child`,
        `restart_child` and `delete_child`, which keep the record and the
        processes in step."""
        raise SysError(
            "replace_state: a supervisor's state cannot be replaced (it records the live children it "
            "started and links to); use start_child, terminate_child, restart_child or delete_child"
        )

    def behaviour_name(self) -> str:
        return "supervisor"

    def status(self) -> dict[str, Any]:
        """Cheap snapshot for `Node.actors()`, the status command and the observer (`status_snapshot`)."""
        if not hasattr(self, "flags"):
            return {}
        return status_snapshot(
            self.flags,
            self._all_children(),
            self._template is not None,
            self._restarts,
            self.clock.now(),
            self._reports,
        )

    def _report(
        self, what: str, child_id: Any, reason: Any, action: str, ref: Any = None, level: int = logging.ERROR
    ) -> None:
        self._reports.report(
            self._label(),
            what,
            child_id,
            reason,
            action,
            template_id=getattr(self._template, "id", None),
            ref=ref,
            normal=_normal(reason),
            level=level,
            now=self.clock.now(),
        )


def _normal(reason: Any) -> bool:
    return is_normal_exit(reason)


class _StaticSupervisor(Supervisor):
    """The supervisor `start_supervisor` spawns: flags and children given as data."""

    def init(self, flags: Any, children: Any) -> tuple[Any, Any]:
        return flags, children


def unwrap(result: Any) -> Any:
    status, value = result
    if status == "error":
        raise value
    return value
