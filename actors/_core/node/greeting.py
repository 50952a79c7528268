"""What a node tells a peer in their handshake, before either reports the other up.

Why: a service that keeps a copy of a cluster-wide table on every node
(the cluster-wide names) must have merged a newly connected node's copy
before anything on this node can see that node connected (``nodes()``,
``nodeup``).  Otherwise, for a moment after a partition heals, a caller on
one node lists the other side and still answers from its own side's copy
while a caller there answers the other: two holders of one name at once.

A service adds a *greeting* for its node: ``offer(peer)`` gives the value
this node tells ``peer`` (called on the link's thread when the handshake
answers the peer, so it is quick, thread-safe and never waits on another
node), and ``accept(peer, value)`` takes the peer's value (called on the
link's thread just before the peer is reported up).  ``accept`` may return
a function to run once the peer *is* up: what must reach the peer (a
monitor, a message) waits for that, since a frame to a node not yet up is
dropped and fails what waits on it.  The values travel
pickled in the link's WELCOME (`actors._core.net.net`), so actor refs in
them resolve on the receiving node.

Greetings are kept per node id: one process may hold several nodes (tests
do), and a greeting belongs to the node whose process runs the service.
"""

from __future__ import annotations

import logging
import pickle
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Offer", "Accept", "accept", "add", "offer", "remove", "run_after_up"]

log = logging.getLogger(__name__)

Offer = Callable[[str], Any]
Accept = Callable[[str, Any], "Callable[[], None] | None"]

_lock = threading.Lock()
_greetings: dict[str, dict[str, tuple[Offer, Accept]]] = {}


def add(node_id: str, key: str, offer_fn: Offer, accept_fn: Accept) -> None:
    """Greet every peer of node ``node_id`` with ``offer_fn``'s value under
    ``key``; a peer's value under ``key`` goes to ``accept_fn``.  Adding a
    key again replaces it (a restarted service)."""
    with _lock:
        _greetings.setdefault(node_id, {})[key] = (offer_fn, accept_fn)


def remove(node_id: str, key: str, offer_fn: Offer | None = None) -> None:
    """Stop greeting under ``key`` (only while ``offer_fn`` is the one added, when given)."""
    with _lock:
        mine = _greetings.get(node_id, {})
        entry = mine.get(key)
        if entry is not None and (offer_fn is None or entry[0] == offer_fn):
            del mine[key]
        if not mine:
            _greetings.pop(node_id, None)


def offer(node_id: str, peer: str) -> bytes | None:
    """The greeting node ``node_id`` sends ``peer``: None when nothing greets."""
    with _lock:
        entries = list(_greetings.get(node_id, {}).items())
    values: dict[str, Any] = {}
    for key, (offer_fn, _) in entries:
        try:
            values[key] = offer_fn(peer)
        except Exception:  # one service's failure leaves the others' greetings
            log.exception("greeting %s for node %s failed", key, peer)
    return pickle.dumps(values) if values else None


def accept(
    node_id: str, peer: str, data: bytes, loads: Callable[[bytes], Any] = pickle.loads
) -> list[Callable[[], None]]:
    """Hand ``peer``'s greeting to the services of node ``node_id`` that know its keys;
    returns what they ask to run once the peer is up.  ``loads`` builds it (plain
    data only, `actors._core.wire.plain.loads_plain`, with ``trust_peers = false``)."""
    try:
        values = loads(data)
    except Exception:  # noqa: BLE001 -- an unreadable greeting is ignored: the services sync later
        log.warning("unreadable greeting from node %s", peer)
        return []
    if type(values) is not dict:
        return []
    then: list[Callable[[], None]] = []
    with _lock:
        entries = dict(_greetings.get(node_id, {}))
    for key, value in values.items():
        entry = entries.get(key)
        if entry is None:
            continue
        try:
            after = entry[1](peer, value)
        except Exception:  # one service's failure leaves the others' greetings
            log.exception("greeting %s from node %s failed", key, peer)
            continue
        if after is not None:
            then.append(after)
    return then


def run_after_up(then: list[Callable[[], None]], peer: str) -> None:
    """Run what `accept` returned, now that ``peer`` is up (each failure logged, never raised)."""
    for fn in then:
        try:
            fn()
        except Exception:
            log.exception("greeting follow-up for node %s failed", peer)
