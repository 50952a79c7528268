"""``otpy status``: a running node's tree, hosts, peers, restarts and sharded types as text.

Attaches to the node through its runtime directory (`attach`) and prints
`status_text`, once or every ``--watch`` seconds.  The text is built by
pure functions of what the node reported, so tests render it without a node.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from typing import Any

from actors.attach import Attached
from actors.interrupt import Interrupted, exit_status, wait_for_signal

from .cli_run import CliError

__all__ = ["cmd_status", "peer_lines", "sharding_lines", "sharding_status", "status_text"]

_REGION = "$sharding."


def cmd_status(args: argparse.Namespace) -> int:
    if args.count is not None and args.watch is None:
        raise CliError("--count needs --watch")
    view = Attached(args.rundir)
    try:
        shown = 0
        while True:
            actors = view.actors()
            hosts = view.hosts()
            counters = view.stats().get("counters", {})
            peers = view.peers()
            regions = sharding_status(view, actors)
            if args.watch and sys.stdout.isatty():
                print("\x1b[2J\x1b[H", end="")
            width = shutil.get_terminal_size((120, 40)).columns if sys.stdout.isatty() else None
            print(
                status_text(
                    view.node_id,
                    view.node_pid,
                    actors,
                    hosts,
                    counters,
                    width=width,
                    peers=peers,
                    now=time.time(),
                    sharding=regions,
                ),
                flush=True,
            )
            shown += 1
            if not args.watch or (args.count and shown >= args.count):
                return 0
            wait_for_signal(args.watch)  # pacing a human-facing refresh; Ctrl-C ends it at once
    except KeyboardInterrupt as exc:
        # Ctrl-C is how one stops --watch: a normal end.
        return 0 if args.watch and not isinstance(exc, Interrupted) else exit_status(exc)
    finally:
        view.close()


def status_text(
    node_id: str,
    node_pid: int,
    actors: list[dict[str, Any]],
    hosts: list[dict[str, Any]],
    counters: dict[str, Any],
    width: int | None = None,
    peers: list[dict[str, Any]] | None = None,
    now: float | None = None,
    sharding: list[dict[str, Any]] | None = None,
) -> str:
    """The status report; with ``width`` (a terminal) tree lines are cut to fit, else kept whole.
    ``peers`` (`Node.peers`) are listed for a distributed node, with how long each has been up at ``now``;
    ``sharding``: the node's regions as `sharding_status` reads them."""
    from actors.tree import render_tree

    live_hosts = [h for h in hosts if h["state"] == "up"]
    lines = [f"node {node_id} (pid {node_pid}): {len(actors)} actors, {len(live_hosts)} host processes"]
    for h in live_hosts:
        lines.append(f"  host {h['label'] or h['proc']}: pid {h['pid']} cpus {h['cpus'] or 'any'}")
    if "@" in node_id:  # a distributed node: its id is name@incarnation
        lines.extend(peer_lines(peers or [], time.time() if now is None else now))
    restarts = {
        k[len("supervision.restarts.") :]: v for k, v in counters.items() if k.startswith("supervision.restarts.")
    }
    if restarts:
        lines.append("restarts: " + ", ".join(f"{k} {v}" for k, v in sorted(restarts.items())))
    dropped = counters.get("actors.mailbox.dropped", 0)
    if dropped or counters.get("actors.mailbox.block_timeouts", 0):
        lines.append(f"mailboxes: dropped {dropped}, block timeouts {counters.get('actors.mailbox.block_timeouts', 0)}")
    lines.extend(sharding_lines(sharding or []))
    lines.append("tree:")
    for line in render_tree(actors):
        line = "  " + line
        if width is not None and len(line) > width:
            line = line[: max(1, width - 1)] + "…"
        lines.append(line)
    return "\n".join(lines)


def sharding_status(view: Any, actors: list[dict[str, Any]], timeout: float = 2.0) -> list[dict[str, Any]]:
    """Each sharding region of the attached node (found by its registered name): its status,
    with the coordinator's table of shards per node when this node leads.  A region that does
    not answer in ``timeout`` is shown as such, never waited on longer."""
    out: list[dict[str, Any]] = []
    names = sorted(
        str(a["registered"])
        for a in actors
        if str(a.get("registered") or "").startswith(_REGION) and str(a["registered"]).count(".") == 1
    )
    for name in names:
        type_name = name[len(_REGION) :]
        try:
            region = view.whereis(name)
            status: dict[str, Any] = dict(view.call(region, "status", timeout=timeout)) if region else {}
            coordinator = view.whereis(f"{name}.coordinator")
            table = view.call(coordinator, "table", timeout=timeout) if coordinator else None
            if table and table.get("active"):
                status["table"] = table
        except Exception as exc:  # noqa: BLE001 - a region restarting: say so, show the rest
            status = {"error": f"{type(exc).__name__}: {exc}"}
        out.append({"type": type_name, **status})
    return out


def sharding_lines(regions: list[dict[str, Any]]) -> list[str]:
    """``sharding:`` and, per type, this node's region (shards, active entities, buffered,
    leader) and, where this node leads, the shards per node of the whole cluster."""
    if not regions:
        return []
    lines = ["sharding:"]
    for r in regions:
        if "error" in r:
            lines.append(f"  {r['type']}: region did not answer ({r['error']})")
            continue
        shards = r.get("shards", [])
        kind = "proxy region (hosts nothing)" if r.get("proxy") else f"{len(shards)} shards here"
        extra = f", remembered {r.get('remembered', 0)}" if r.get("remember") else ""
        lines.append(
            f"  {r['type']}: {kind}, {r.get('active_entities', 0)} active entities{extra}, "
            f"{r.get('buffered', 0)} buffered, leader {r.get('leader') or 'none'}, "
            f"{'store' if r.get('store') else 'no store'}"
        )
        table = r.get("table")
        if table:
            per_node = ", ".join(f"{n} {len(s)}" for n, s in sorted(table.get("shards", {}).items()))
            moving = table.get("moving") or []
            lines.append(
                f"    shards per node: {per_node or 'none placed'}" + (f"; moving {len(moving)}" if moving else "")
            )
    return lines


def peer_lines(peers: list[dict[str, Any]], now: float) -> list[str]:
    """``peers: N`` and a line per connected node: name, address, incarnation, up since (UTC) and for how long."""
    lines = [f"peers: {len(peers)}" if peers else "peers: none connected"]
    for p in peers:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(p["up_since"]))
        lines.append(
            f"  {p['name']}  {p['address']}  incarnation {p['incarnation']}  up since {since} UTC "
            f"({_duration(now - p['up_since'])})"
        )
    return lines


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
