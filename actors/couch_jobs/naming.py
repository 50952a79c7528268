"""Registered names for actors started by a supervisor.

The seed registers ``couch_jobs_server`` and its supervisors locally
(``{local, ?MODULE}``) so any process finds them by name.  The kernel's
public API names an actor only at ``spawn(name=...)``, and a supervisor's
``ChildSpec`` has no name, so an actor started by a supervisor takes its
name here, from its own ``init``.  The name is tied to the actor's cell the
same way ``spawn(name=...)`` ties it, so it is released before anyone hears
of the actor's death and its restarted successor can take it again.
"""

from __future__ import annotations

from actors import AlreadyRegistered, GenServer

__all__ = ["register_self"]


def register_self(actor: GenServer, name: str) -> None:
    """Register the calling actor (from its ``init``) as ``name``.

    Raises `AlreadyRegistered` when another live actor holds the name.
    """
    cell = actor._actor_cell
    if cell.name is not None:
        raise RuntimeError(f"{actor.ref!r} is already registered as {cell.name!r}")
    holder = cell.runtime.register_name(name, actor.ref)
    if holder is not None:
        raise AlreadyRegistered(("already_started", holder), f"name {name!r} is taken")
    cell.name = name
