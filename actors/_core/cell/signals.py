"""One actor's signals and death: links, monitors, exit signals, its name.

Erlang's rules for exit signals (trapped or not, ``kill`` untrappable,
``normal`` ignored) are decided here, on arrival, on whatever thread brings
the signal.  Death is a one-way transition under the cell's lock: it takes
the links, monitors and unanswered calls out at once, then tells each of
them, after what the actor sent before it died and after its name is free.

The loop that runs the actor's callbacks is above, in `actors._core.cell.cell`.
"""

from __future__ import annotations

from typing import Any

from actors._core.cell.entries import M_DOWN, M_EXIT, M_WAKE
from actors._core.cell.state import CellState
from actors._core.runtime.runtime import EXIT_KILL, EXIT_LINKED
from actors._core.wire.ref import ActorRef, From

__all__ = ["CellSignals"]


class CellSignals(CellState):
    """A cell's signals and death (see the module's docstring)."""

    __slots__ = ()

    # -- signals (any thread) --------------------------------------------------------

    def exit_signal(self, sender: ActorRef | None, reason: Any, how: int) -> None:
        """Erlang's exit-signal rules; the decision is made on arrival.

        ``how`` is `EXIT_LINKED` for a linked actor's death (which ends the
        link), else the signal of ``exit/2`` (the link, if any, stays).  An
        ``exit/2`` ``kill`` is untrappable; a linked actor that died with
        reason ``kill`` sends an ordinary signal (trappable; a non-trapping
        receiver dies with reason ``kill`` and passes it on, as in Erlang).  ``normal`` is ignored by a non-trapping
        receiver, except ``exit(self(), normal)``, which ends it."""
        linked = how == EXIT_LINKED
        if linked and sender is not None:
            with self.lock:
                self.links.pop(sender, None)
        if how == EXIT_KILL or (reason == "kill" and not linked):
            self.die("killed")
            return
        if self.trap_exit:
            self.enqueue(M_EXIT, (sender, reason))
            return
        if reason == "normal" and sender != self.ref:
            return
        self.die(reason)

    def add_link(self, other: ActorRef) -> bool:
        with self.lock:
            if not self.alive:
                return False
            self.links[other] = other
            return True

    def remove_link(self, other: ActorRef) -> None:
        with self.lock:
            self.links.pop(other, None)

    def add_monitor(self, mref: Any, watcher: ActorRef) -> bool:
        with self.lock:
            if not self.alive:
                return False
            self.monitors_in[mref] = watcher
            return True

    def remove_monitor(self, mref: Any) -> None:
        with self.lock:
            self.monitors_in.pop(mref, None)

    def down(self, mref: Any, target: ActorRef, reason: Any) -> None:
        self.enqueue(M_DOWN, (mref, target, reason))

    def proc_down(self, proc: str, reason: Any) -> None:
        with self.lock:
            linked = [r for r in self.links.values() if r.proc == proc]
            for r in [w for w in self.monitors_in.items() if w[1].proc == proc]:
                del self.monitors_in[r[0]]
            watched = [(m, r) for m, r in self.monitors_out.items() if r.proc == proc]
        for mref, target in watched:
            self.down(mref, target, reason)
        for ref in linked:
            self.exit_signal(ref, reason, EXIT_LINKED)

    # -- death (any thread) ------------------------------------------------------------

    def die(
        self,
        reason: Any,
        reply: tuple[From, Any] | None = None,
        stop_reply: From | None = None,
    ) -> None:
        rt = self.runtime

        def notify(_ok: bool = True, _value: Any = None) -> None:
            outbox = self.outbox
            if outbox is not None:
                # What the actor sent before it died goes before any word of
                # its death (it may die on another thread: a kill).
                rt.flush_outbox(outbox)
            if reply is not None:
                rt.reply(reply[0], reply[1])
            for from_ in inflight:
                rt.reply_exit(from_, reason)
            for mref, target in watched:
                rt.request_demonitor(target, mref)
            for ref in links:
                rt.send_exit(ref, self.ref, reason)
            for mref, watcher in watchers:
                rt.send_down(watcher, mref, self.ref, reason)
            if stop_reply is not None:
                rt.reply(stop_reply, reason)
            self._gone()

        with self.lock:
            if not self.alive:
                return
            self.alive = False
            self.exit_reason = reason
            inflight = list(self.inflight.values())
            self.inflight.clear()
            links = list(self.links.values())
            self.links.clear()
            watchers = list(self.monitors_in.items())
            self.monitors_in.clear()
            watched = list(self.monitors_out.items())
            self.monitors_out.clear()
            name = self.name
            if self._naming is not None:
                # The (still running) callback is taking a name: whether it
                # gets it is not known yet, so the death notice waits for
                # `claim_name` to release it first.
                self._after_naming = notify
                name = notify = None  # type: ignore[assignment]
        rt.meters.retire(rt.cells, self, reason)
        self._thread.stop()
        self.inbox.put((M_WAKE, None, None))
        if notify is None:
            return
        if name is not None:
            # Unregister before anyone hears of the death, so a supervisor
            # restarting the child can take the name again.
            rt.unregister_name_then(name, self.ref, notify)
        else:
            notify()

    def claim_name(self, name: str) -> ActorRef | None:
        """Register this actor as ``name`` (actor thread); the holder when
        another actor has it.

        Erlang releases a name before the exit signals of its holder go out.
        An actor killed while its callback registers a name must keep that
        order too: `die` then leaves its notice to this method, which first
        gives the name back (if the registry gave it) and only then lets the
        death be heard.  A dead actor takes no name at all.
        """
        with self.lock:
            if not self.alive:
                return None
            self._naming = name
        holder: ActorRef | None = None
        got = False
        try:
            holder = self.runtime.register_name(name, self.ref)
            got = holder is None
        finally:
            with self.lock:
                self._naming = None
                then, self._after_naming = self._after_naming, None
                if then is None and got:
                    self.name = name
                    self.ref.name = name
            if then is not None:
                if got:
                    self.runtime.unregister_name_then(name, self.ref, then)
                else:
                    then()
        return holder

    def adopt_name(self, name: str) -> Any:
        """The actor is given ``name`` from outside (`Node.register`, OTP's
        ``register(Name, Pid)``; the registry holds it already): remember it,
        so that its death releases it.  ``"ok"``; ``"dead"``; or
        ``("named", current)`` when it has another name (one name per actor)."""
        with self.lock:
            if not self.alive:
                return "dead"
            current = self.name if self.name is not None else self._naming
            if current is not None and current != name:
                return ("named", current)
            self.name = name
            self.ref.name = name
            return "ok"

    def drop_name(self, name: str) -> None:
        """``name`` was unregistered (`Node.unregister`): the actor may take another."""
        with self.lock:
            if self.name == name:
                self.name = None
                self.ref.name = None

    def _gone(self) -> None:
        hook = self.runtime.on_cell_gone
        if hook is not None:
            hook(self)  # type: ignore[arg-type]  # the runtime names the whole Cell, built above
