"""The command line: every subcommand's happy path, and every way it can be misused or interrupted."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import actors.app.demo as demo_module
import actors.tools.cli_run as cli_run
from actors import cluster_settings
from actors.app import configcheck
from actors.attach import Attached
from actors.config import Config
from actors.couch_jobs import settings as couch_jobs_settings
from actors.tools import benchrun
from actors.tools.cli import COMMANDS, build_parser, main, status_text
from actors.tree import render_tree
from tests.kernel.probes import Echo

ROOT = str(Path(__file__).resolve().parent.parent)
ENV = dict(os.environ, PYTHONPATH=ROOT)
CLI = [sys.executable, "-m", "actors"]


def _cli(*args: str, timeout: float = 110, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=ENV, cwd=ROOT, **kw)


def _usage_error(capsys, argv: list[str]) -> str:
    """Run ``main(argv)`` expecting a usage error: exit 2 and one line on stderr."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


# -- demo ----------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_demo_short_reports_nothing_lost_and_what_it_counted():
    out = _cli("demo", "--short", "--no-live", "--seed", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "seed 1 (repeat this run with --seed 1)" in out.stdout
    result = [line for line in out.stdout.splitlines() if line.startswith("RESULT:")]
    assert len(result) == 1
    line = result[0]
    assert line.startswith("RESULT: nothing lost -- checked ")
    for what in (
        r"\d+ jobs",
        r"\d+ replicated documents \(\d+ acknowledged source writes\)",
        r"\d+ acknowledged write rounds on \d+ databases",
        r"\d+ answered reads",
    ):
        assert re.search(what, line), (what, line)
    assert "0 hung" in out.stdout
    for service in ("couch_jobs:", "replicator:", "smoosh:", "ioq:"):
        assert service in out.stdout, service
    assert "finished exactly once" in out.stdout and ", 0 missing" in out.stdout
    state_dir = re.search(r"state directory (\S+)", out.stdout).group(1)
    assert not os.path.exists(state_dir)


def test_result_line_says_what_nothing_lost_counts():
    from actors.app.workload import Check

    checks = [Check("a", counted="3 jobs"), Check("b", counted="7 answered reads", failed=2)]
    assert demo_module.result_line(checks, 2, True) == (
        "RESULT: nothing lost -- checked 3 jobs, 7 answered reads; "
        "2 calls failed with an exit reason under kills (expected, not lost)"
    )
    checks[0].lost = 1
    assert demo_module.result_line(checks, 0, True).startswith("RESULT: FAILED -- 1 items lost (a 1) of 3 jobs")


def _finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """Wait and read the rest of stdout through the buffer ``readline`` used (communicate bypasses it)."""
    assert proc.stdout is not None and proc.stderr is not None
    proc.wait(timeout=timeout)
    return proc.stdout.read(), proc.stderr.read()


def _demo_until_load(*extra: str) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        [*CLI, "demo", "--no-live", "--duration", "60", "--seed", "2", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=ROOT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    lines = []
    for _ in range(50):
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("workload (seed"):
            return proc, lines
    proc.kill()
    raise AssertionError("demo never reached its load phase:\n" + "".join(lines) + proc.stderr.read())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_demo_interrupted_prints_partial_summary_and_cleans_up(signum, status):
    proc, lines = _demo_until_load()
    text = "".join(lines)
    rundir = re.search(r"runtime directory (\S+)", text).group(1)
    state_dir = re.search(r"state directory (\S+)", text).group(1)
    assert os.path.isdir(state_dir) and os.path.isdir(rundir)
    os.killpg(proc.pid, signum)
    out, err = _finish(proc, 100)
    assert proc.returncode == status, out + err
    assert "INTERRUPTED after" in out and "PARTIAL summary" in out
    assert "RESULT: interrupted after" in out
    assert "Traceback" not in err, err  # neither from the command nor from any thread shutting down
    assert not os.path.exists(state_dir), "temporary state directory leaked"
    assert not os.path.exists(rundir), "runtime directory leaked"


@pytest.mark.timeout(120)
def test_demo_given_ctrl_c_again_and_again_still_reports_and_exits_130():
    """The first Ctrl-C stops the load; the rest cannot cut the summary or the cleanup short (each used
    to raise out of whatever cleanup it landed in, and the last could end the process by the signal)."""
    proc, lines = _demo_until_load()
    text = "".join(lines)
    rundir = re.search(r"runtime directory (\S+)", text).group(1)
    sent = 0
    for sent in range(1, 5001):  # every 20 ms until it has exited: at most 100 s of signals
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=0.02)
            break
        except subprocess.TimeoutExpired:
            continue
    out, err = _finish(proc, 60)
    assert sent > 1, "it stopped before a second signal came: nothing tested"
    assert proc.returncode == 130, out + err
    assert "RESULT: interrupted after" in out
    assert "Traceback" not in err, err
    assert not os.path.exists(rundir), "runtime directory leaked"


@pytest.mark.timeout(120)
def test_demo_into_head_does_not_leak_its_state_dir():
    shell = f"{sys.executable} -m actors demo --short --no-live --seed 4 | head -4; exit ${{PIPESTATUS[0]}}"
    out = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=110, env=ENV, cwd=ROOT)
    assert out.returncode == 141, out.stdout + out.stderr
    state_dir = re.search(r"state directory (\S+)", out.stdout).group(1)
    rundir = re.search(r"runtime directory (\S+)", out.stdout).group(1)
    assert not os.path.exists(state_dir)
    assert not os.path.exists(rundir)
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr


def test_demo_removes_its_temporary_state_dir_on_error(monkeypatch, capsys):
    made: list[str] = []
    real = demo_module.tempfile.mkdtemp

    def mkdtemp(**kw):
        made.append(real(**kw))
        return made[-1]

    def fail(node, cfg, state_dir, *a, **kw):
        raise PermissionError(13, "Permission denied", os.path.join(state_dir, "data"))

    monkeypatch.setattr(demo_module.tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(demo_module, "_run", fail)
    assert main(["demo", "--short", "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == f"otpy demo: error: Permission denied: {made[0]}/data"
    assert "Traceback" not in err
    assert made and not os.path.exists(made[0])


# -- numbers and options ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,option",
    [
        (["demo", "--duration", "nan"], "--duration"),
        (["demo", "--duration", "inf"], "--duration"),
        (["demo", "--duration", "-1"], "--duration"),
        (["demo", "--duration", "0"], "--duration"),
        (["demo", "--kill-rate", "-1"], "--kill-rate"),
        (["demo", "--kill-rate", "-inf"], "--kill-rate"),
        (["demo", "--seed", "x"], "--seed"),
        (["chaos", "--rate", "nan"], "--rate"),
        (["chaos", "--rate", "-2"], "--rate"),
        (["chaos", "--duration", "0"], "--duration"),
        (["chaos", "--clients", "0"], "--clients"),
        (["chaos", "--clients", "1.5"], "--clients"),
        (["status", "x", "--watch", "0"], "--watch"),
        (["status", "x", "--watch", "nan"], "--watch"),
        (["status", "x", "--count", "-1"], "--count"),
    ],
)
def test_bad_numbers_are_refused_naming_the_option(capsys, argv, option):
    err = _usage_error(capsys, argv)
    assert f"argument {option}:" in err
    assert "invalid" not in err  # not argparse's "invalid _positive value"


def test_short_with_duration_is_an_error(capsys):
    err = _usage_error(capsys, ["demo", "--short", "--duration", "30"])
    assert "--duration" in err and "--short" in err


def test_version_and_prog_name(capsys, monkeypatch):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert re.fullmatch(r"otpy \S+.*\n", capsys.readouterr().out)
    monkeypatch.setattr(sys, "argv", ["/usr/bin/otpy", "--help"])
    with pytest.raises(SystemExit):
        main(["--help"])
    assert capsys.readouterr().out.startswith("usage: otpy ")
    out = _cli("--help", timeout=30)
    assert out.stdout.startswith("usage: python -m actors ")


def test_verbose_and_log_level_accepted_after_the_subcommand():
    parser = build_parser("otpy")
    for argv in (["-v", "status", "d"], ["status", "d", "-v"], ["status", "-v", "d"]):
        assert parser.parse_args(argv).verbose is True
    args = parser.parse_args(["status", "d", "--log-level", "debug"])
    assert args.log_level == "debug" and args.verbose is False
    assert parser.parse_args(["--log-level", "info", "status", "d"]).log_level == "info"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_every_option_has_help_and_the_description_is_plain_text():
    parser = build_parser("otpy")
    subs = _subparsers(parser)
    assert set(subs) == {f.__name__[len("add_") :] for f in COMMANDS}
    for name, sub in [("otpy", parser), *subs.items()]:
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            assert action.help and action.help != argparse.SUPPRESS, (name, action.option_strings or action.dest)
    for text in (parser.description, *(s.description for s in subs.values())):
        assert text and "``" not in text and not re.search(r":\w+:`", text), text


def test_a_subcommand_is_one_function_in_commands(capsys):
    def add_hello(sub) -> None:
        p = sub.add_parser("hello", help="say hello")
        p.add_argument("--name", default="you", help="who")
        p.set_defaults(run=lambda args: print(f"hello {args.name}") or 0)

    COMMANDS.append(add_hello)
    try:
        assert main(["hello", "--name", "otpy"]) == 0
    finally:
        COMMANDS.remove(add_hello)
    assert capsys.readouterr().out == "hello otpy\n"


# -- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,named",
    [
        ("[replicator]\nmax_jobs = abc\n", "[replicator] max_jobs = 'abc': not an integer"),
        ("[replicator]\nmax_jobs = 0\n", "[replicator] max_jobs = '0': must be >= 1"),
        ("[couch]\nintensity = -1\n", "[couch] intensity = '-1': must be >= 0"),
        ("[couch]\nperiod = -5\n", "[couch] period = '-5': must be > 0"),
        ("[ioq2]\nenabled = maybe\n", "[ioq2] enabled = 'maybe': not a boolean"),
        ("[smoosh.ratio_dbs]\nfrom = 25:00\n", "[smoosh.ratio_dbs] from = '25:00'"),
        ("[couch_jobs]\ntype_check_period_msec = nan\n", "[couch_jobs] type_check_period_msec = 'nan'"),
        ("[replicator]\nstore = /var/lib/repl.db\n", "[replicator] store = '/var/lib/repl.db': not a PostgreSQL URL"),
        ("[replicator]\nlease = sometimes\n", "[replicator] lease = 'sometimes': not a boolean"),
        ("[replicator]\nlease_ttl = 0\n", "[replicator] lease_ttl = '0': must be > 0"),
        ("[cluster]\ndirect_ports = 9-2\n", "[cluster] direct_ports = '9-2': ports go from 1 to 65535"),
        ("[cluster]\ndirect_ports = high\n", "[cluster] direct_ports = 'high': not FIRST-LAST"),
    ],
)
def test_bad_config_values_are_refused_before_boot(tmp_path, capsys, text, named):
    ini = tmp_path / "bad.ini"
    ini.write_text(text)
    assert main(["demo", "--short", "--config", str(ini)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"otpy demo: error: {ini}: {named}")


def test_values_the_services_take_pass_the_check():
    """``[smoosh] watch_interval = 0`` means no watcher to smoosh; the check must not refuse it."""
    cfg = Config({**demo_module.DEMO_CONFIG, "smoosh": {"watch_interval": "0"}})
    result = configcheck.check(cfg)
    assert result.ok, result.errors
    bad = configcheck.check(Config({**demo_module.DEMO_CONFIG, "smoosh": {"watch_interval": "-1"}}))
    assert not bad.ok
    leases = {"store": "postgresql://u@h:5432/db", "lease": "auto", "lease_ttl": "6"}
    assert configcheck.check(Config({**demo_module.DEMO_CONFIG, "replicator": leases})).ok


def test_unknown_sections_and_keys_are_warned_by_name():
    cfg = Config(
        {
            **demo_module.DEMO_CONFIG,
            "replicatr": {"max_jobs": "3"},
            "replicator": {"max_job": "3"},
            "smoosh.nosuch_channel": {"concurrency": "1"},
            "smoosh.ignore": {"anydb": "true"},
        }
    )
    result = configcheck.check(cfg)
    assert result.ok, result.errors
    assert "unknown section [replicatr] is ignored" in result.warnings
    assert "unknown key [replicator] max_job is ignored" in result.warnings
    assert any(w.startswith("unknown section [smoosh.nosuch_channel]") for w in result.warnings)
    assert len(result.warnings) == 3  # [smoosh.ignore] takes any database name


def test_demo_config_warnings_are_printed(tmp_path):
    ini = tmp_path / "typo.ini"
    ini.write_text("[replicator]\nmax_job = 3\n")
    seen: list[str] = []
    demo_module.load_config(str(ini), warn=seen.append)
    assert seen == [f"{ini}: unknown key [replicator] max_job is ignored"]


@pytest.mark.parametrize(
    "content,what",
    [
        (None, "config file not found"),
        ("max_jobs = 3\n", "File contains no section headers"),
        ("[replicator]\nthis line has no equals sign\n", "Source contains parsing errors"),
    ],
)
def test_bad_config_files_name_the_file(tmp_path, capsys, content, what):
    ini = tmp_path / "c.ini"
    if content is not None:
        ini.write_text(content)
    assert main(["demo", "--short", "--config", str(ini)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(ini) in err and what in err and "Traceback" not in err


def test_a_service_that_fails_to_start_is_one_line_naming_it():
    """A nested `StartError` (couch_sup > couch_jobs_sup > its store) reads as the
    path of child ids and the innermost reason, not the repr of the nest."""
    from actors import Crash
    from supervision.errors import StartError

    crash = Crash("StoreUnavailable", "couch_jobs store 'postgresql://bob:***@h/db' is unavailable: refused", "tb")
    nested = StartError("couch_jobs_sup", ("shutdown", ("failed_to_start_child", "couch_jobs_fdb", crash)))
    error = cli_run.start_failure(nested)
    assert str(error) == (
        "couch_jobs_sup > couch_jobs_fdb failed to start: StoreUnavailable: "
        "couch_jobs store 'postgresql://bob:***@h/db' is unavailable: refused"
    )
    assert str(cli_run.start_failure(StartError(None, "ignore"))) == "the application failed to start: ignore"


@pytest.mark.timeout(120)
def test_demo_with_an_unreachable_store_is_one_line_and_exit_2(tmp_path):
    """A bad store URL fails the start with one line naming it, through the
    command line's one error path: exit 2, no traceback, no password."""
    url = "postgresql://bob:s3cret@127.0.0.1:5x/jobs"
    out = _cli("demo", "--short", "--no-live", "--store", url, "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert "failed to start: StoreUnavailable: couch_jobs store 'postgresql://bob:***@127.0.0.1:5x/jobs'" in out.stderr
    assert "s3cret" not in out.stdout + out.stderr


def test_verbose_shows_the_traceback(tmp_path, capsys):
    ini = tmp_path / "c.ini"
    ini.write_text("[replicator]\nmax_jobs = abc\n")
    assert main(["demo", "-v", "--short", "--config", str(ini)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].endswith("max_jobs = 'abc': not an integer")


# -- chaos ------------------------------------------------------------------------------------------


def _restarts(text: str) -> dict[str, int]:
    line = next(line for line in text.splitlines() if line.startswith("restarts per supervisor: "))
    body = line[len("restarts per supervisor: ") :]
    if body == "none":
        return {}
    return {name: int(n) for name, n in (part.rsplit(" ", 1) for part in body.split(", "))}


@pytest.mark.timeout(60)
def test_chaos_reports_restarts_by_supervisor_name_and_no_hangs(capsys):
    assert main(["chaos", "--rate", "10", "--duration", "2", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert "seed 3" in text
    restarts = _restarts(text)
    assert sum(restarts.values()) > 0, text  # kills at 10/s for 2 s: supervisors restarted children
    assert set(restarts) <= {"demo_sup", "pipeline", "pair", "pool"}, restarts  # names, not n.2
    kills = int(re.search(r"(\d+) kills", text).group(1))
    assert kills > 0
    assert re.search(r"calls: \d+ answered, \d+ failed with an exit reason, 0 hung", text)
    assert "OK: no call hung" in text


@pytest.mark.timeout(60)
def test_chaos_interrupted_by_sigint_reports_and_exits_130():
    proc = subprocess.Popen(
        [*CLI, "chaos", "--rate", "5", "--duration", "50", "--seed", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=ROOT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    rundir = re.search(r"tree up in (\S+);", first).group(1)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = _finish(proc, 40)
    assert proc.returncode == 130, first + out + err
    assert out.startswith("INTERRUPTED, partial report: chaos ran")
    assert "restarts per supervisor:" in out and "Traceback" not in err
    assert not os.path.exists(rundir)


# -- status -------------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_status_attaches_to_a_running_node(node, capsys):
    ref = node.spawn(Echo, name="echo", host="own", cpus={0})
    listing = sorted(os.listdir(node.rundir))
    with Attached(node.rundir) as view:
        actors = view.actors()
        assert any(a["id"] == ref.id and a["registered"] == "echo" and a["cpus"] == [0] for a in actors)
        assert any(h["pid"] == ref.os_pid for h in view.hosts())
        assert any(f.startswith("cli") for f in os.listdir(node.rundir))  # its own endpoint while attached
    assert main(["status", node.rundir]) == 0
    text = capsys.readouterr().out
    assert "echo" in text and str(ref.os_pid) in text
    # Attaching left nothing behind and removed nothing.  (The node may add a
    # warm spare host's socket meanwhile, so compare what attaching owns.)
    after = os.listdir(node.rundir)
    assert [f for f in after if f.startswith("cli")] == []
    assert set(listing) <= set(after)


def _not_a_node(capsys, rundir: str) -> str:
    assert main(["status", rundir]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_status_on_a_directory_without_node(tmp_path, capsys):
    assert "is not the runtime directory of a running node (no node.json)" in _not_a_node(capsys, str(tmp_path))


def test_status_on_a_missing_directory(tmp_path, capsys):
    assert f"{tmp_path}/gone: no such directory" in _not_a_node(capsys, str(tmp_path / "gone"))


def test_status_on_a_corrupt_node_file(tmp_path, capsys):
    (tmp_path / "node.json").write_text("{half")
    assert f"{tmp_path}/node.json is corrupt" in _not_a_node(capsys, str(tmp_path))
    (tmp_path / "node.json").write_text('{"pid": 1}')
    assert "expected node_id, pid and proc" in _not_a_node(capsys, str(tmp_path))


def test_status_on_a_stale_directory(tmp_path, capsys):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    (tmp_path / "node.json").write_text(json.dumps({"node_id": "x", "pid": int(dead.stdout), "proc": "n"}))
    err = _not_a_node(capsys, str(tmp_path))
    assert f"{tmp_path} is stale: its node process {int(dead.stdout)} is gone" in err
    assert os.listdir(tmp_path) == ["node.json"]  # nothing bound in a dead node's directory


def test_status_count_needs_watch(capsys, tmp_path):
    assert main(["status", str(tmp_path), "--count", "2"]) == 2
    assert "--count needs --watch" in capsys.readouterr().err


def test_render_tree_draws_tree_connectors():
    actors = [
        {"id": "n.1", "name": "top", "class": "Sup", "pid": 1, "mailbox": 0, "parent": None},
        {"id": "n.2", "name": None, "class": "Sup", "pid": 2, "mailbox": 3, "parent": "n.1", "cpus": [0]},
        {"id": "h1.1", "name": None, "class": "W", "pid": 3, "mailbox": 0, "parent": "n.2"},
        {"id": "h1.2", "name": None, "class": "W", "pid": 3, "mailbox": 0, "parent": "n.2"},
        {"id": "n.3", "name": "last", "class": "W", "pid": 1, "mailbox": 0, "parent": "n.1"},
    ]
    lines = render_tree(actors)
    assert [re.split(r"  (?=Sup|W  )", line)[0] for line in lines] == [
        "top (n.1)",
        "├─ n.2",
        "│  ├─ h1.1",
        "│  └─ h1.2",
        "└─ last (n.3)",
    ]
    assert "cpus 0" in lines[1] and "mbox 3" in lines[1]


def test_status_lines_whole_off_a_terminal_and_cut_on_one():
    long_status = {"note": " ".join(["word"] * 60)}
    actors = [
        {"id": "n.1", "name": "top", "class": "Sup", "pid": 1, "mailbox": 0, "parent": None, "status": long_status}
    ]
    hosts = [{"state": "up", "label": None, "proc": "h1", "pid": 3, "cpus": None}]
    whole = status_text("x", 1, actors, hosts, {})
    assert "1 host processes" in whole
    assert whole.splitlines()[-1].endswith("word word")  # not cut at any width
    cut = status_text("x", 1, actors, hosts, {}, width=40)
    assert all(len(line) <= 40 for line in cut.splitlines()[2:])
    assert cut.splitlines()[-1].endswith("…")


# -- bench ---------------------------------------------------------------------------------------------


def test_bench_from_elsewhere_says_where_to_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--quick"]) == 2
    err = capsys.readouterr().err
    assert f"no bench/ folder in {tmp_path}: run it from the repository root, e.g. cd {ROOT} && otpy bench" in err


HARNESS = """
import json, os, sys
print("table of {name}:", len(os.sched_getaffinity(0)), "cores", "quick" if "--quick" in sys.argv else "full")
out = os.environ.get("OTPY_BENCH_RESULTS") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "{name}.json"), "w") as fh:
    json.dump({{"ops_per_s": 1.0 if "--quick" in sys.argv else 10.0}}, fh)
"""


def test_bench_prints_each_table_as_it_finishes(tmp_path, capsys):
    (tmp_path / "bench").mkdir()
    for name in ("alpha", "beta"):
        (tmp_path / "bench" / f"{name}.py").write_text(HARNESS.format(name=name))
    args = argparse.Namespace(cores="1", quick=True, only=None, out="bench/results")
    assert benchrun.run_benches(args, root=tmp_path) == 0
    out = capsys.readouterr().out
    assert (
        out.index("== alpha on 1 core(s): ok")
        < out.index("table of alpha: 1 cores quick")
        < out.index("== beta on 1 core(s): ok")
        < out.index("table of beta: 1 cores quick")
    )
    summary = json.loads((tmp_path / "bench" / "results" / "all.json").read_text())
    assert summary["harnesses"]["alpha"]["1"]["metrics"] == {"ops_per_s": 1.0}


def test_a_quick_bench_never_overwrites_a_full_runs_results(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "alpha.py").write_text(HARNESS.format(name="alpha"))
    results = tmp_path / "bench" / "results"
    assert benchrun.run_benches(argparse.Namespace(cores="1", quick=False, only=None, out=None), root=tmp_path) == 0
    full = {p.name: p.read_text() for p in results.glob("*.json")}
    assert json.loads(full["alpha.json"]) == {"ops_per_s": 10.0}
    assert benchrun.run_benches(argparse.Namespace(cores="1", quick=True, only=None, out=None), root=tmp_path) == 0
    assert {p.name: p.read_text() for p in results.glob("*.json")} == full
    quick = json.loads((results / "quick" / "all.json").read_text())
    assert quick["quick"] and quick["harnesses"]["alpha"]["1"]["metrics"] == {"ops_per_s": 1.0}


def test_bench_readme_lists_every_harness():
    readme = (Path(ROOT) / "bench" / "README.md").read_text()
    for harness in benchrun.discover(Path(ROOT) / "bench"):
        assert f"`{harness.name}`" in readme, harness.name


def test_every_harness_writes_under_bench_results_and_cleans_its_temp_dirs():
    for harness in benchrun.discover(Path(ROOT) / "bench"):
        source = harness.read_text()
        assert "write_json(" in source or "RESULTS_DIR" in source, harness.name
        for match in re.finditer(r"(\w+) = tempfile\.mkdtemp\(", source):
            assert f"shutil.rmtree({match.group(1)}" in source, (harness.name, match.group(0))


def test_smoosh_job_watcher_is_quiet_when_its_runtime_is_gone():
    """Seen as a thread traceback when a demo was interrupted: the watcher of a
    compaction outlived its process's runtime and its last send raised."""
    import threading

    from actors import Exit
    from actors.smoosh.channel import _watch

    class Job:
        def wait(self, timeout):
            return 0

    class GoneChannel:
        def send(self, message):
            raise Exit("noconnection", "node is not running in this process")

    _watch(Job(), GoneChannel(), threading.Event())  # returns, raises nothing


def test_the_config_table_knows_every_setting_the_services_read():
    from actors.ioq.ioq_config import IOQ2_DEFAULTS
    from actors.replicator.settings import Settings

    assert set(Settings.keys()) <= set(configcheck.SCHEMA["replicator"].keys)
    assert set(IOQ2_DEFAULTS) <= set(configcheck.SCHEMA["ioq2"].keys)
    assert set(cluster_settings.KEYS) <= set(configcheck.SCHEMA["cluster"].keys)  # connect_all included
    # each reader in couch_jobs.settings is named after the key it reads
    jobs_keys = {name for name in dir(couch_jobs_settings) if name.endswith("_msec") or name.startswith("pg_")}
    assert jobs_keys <= set(configcheck.SCHEMA["couch_jobs"].keys)  # pg_pool_size is in docs/couch_jobs.md
    assert not configcheck.check(Config({"couch_jobs": {"busy_timeout_msec": "0"}})).ok  # the reader refuses 0
    assert configcheck.check(Config({"cluster": {"connect_all": "false"}})).warnings == []
    assert configcheck.check(Config({"cluster": {"connect_all": "maybe"}})).errors == [
        "[cluster] connect_all = 'maybe': not a boolean (true/false, yes/no, on/off, 1/0)"
    ]
    result = configcheck.check(Config(demo_module.DEMO_CONFIG))
    assert result.ok and result.warnings == []
    assert configcheck.check(
        Config(
            {
                "couch_jobs": {"type_monitor_timeout_msec": "infinity"},
                "smoosh.ratio_dbs": {"max_priority": "infinity", "to": "23:30"},
            }
        )
    ).ok


@pytest.mark.timeout(60)
def test_status_watch_stopped_by_sigterm_leaves_nothing_in_the_nodes_directory(node):
    listing = sorted(os.listdir(node.rundir))
    proc = subprocess.Popen(
        [*CLI, "status", node.rundir, "--watch", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(f"node {node.id} ")  # attached and printing
    proc.send_signal(signal.SIGTERM)
    _out, err = _finish(proc, 30)
    assert proc.returncode == 143, err
    assert sorted(os.listdir(node.rundir)) == listing


def test_status_lists_the_peers_of_a_distributed_node_only():
    peers = [
        {"name": "h2", "address": "tcp://10.0.0.2:4370", "incarnation": "1f", "up_since": 1000.0},
        {"name": "h3", "address": "tcp://10.0.0.3:4370", "incarnation": "2e", "up_since": 1000.0},
    ]
    text = status_text("h1@abc", 1, [], [], {}, peers=peers, now=1125.0)
    assert "peers: 2" in text
    assert "  h2  tcp://10.0.0.2:4370  incarnation 1f  up since 1970-01-01 00:16:40 UTC (2m05s)" in text
    assert "peers: none connected" in status_text("h1@abc", 1, [], [], {}, peers=[], now=0.0)
    assert "peers" not in status_text("1234-1-abcdef", 1, [], [], {})


@pytest.mark.timeout(30)
def test_status_shows_each_sharded_types_region_shards_and_active_entities(node, capsys):
    from actors import sharding
    from tests.sharding.entities import Counter

    sharding.start(node, "cart", Counter, shards=4, remember=True)
    for key in ("k1", "k2", "k3"):
        assert sharding.ref("cart", key).call(1) == 1
    assert main(["status", node.rundir]) == 0
    text = capsys.readouterr().out
    assert "sharding:" in text
    line = re.search(r"  cart: .*", text).group(0)
    assert re.search(r"\d shards here, 3 active entities, remembered 3, 0 buffered, leader \S+, no store", line), line
    per_node = re.search(r"    shards per node: (\S+) (\d)", text)  # this node leads: the coordinator's table
    assert per_node and int(per_node.group(2)) >= 1, text
    assert "sharding" not in status_text("h1@abc", 1, [], [], {}, peers=[], now=0.0)


def test_demo_hosts_where_namespaces_cannot_be_made_says_so_in_one_line(monkeypatch, capsys):
    import actors.app.demo_hosts

    monkeypatch.setattr(actors.app.demo_hosts, "missing", lambda: "network-namespace hosts need root")
    assert main(["demo", "--nodes", "3", "--hosts", "--short"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: demo --hosts: network-namespace hosts need root"]
    assert main(["demo", "--hosts", "--short"]) == 2  # --hosts without --nodes N
    assert "--hosts needs --nodes" in capsys.readouterr().err
