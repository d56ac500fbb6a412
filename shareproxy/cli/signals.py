"""Stop signals from the command's first moments. SIGTERM and SIGINT are caught before the
second or so of imports, so a stop while a command starts is one line and an exit code, never
a traceback or a death by signal. Until the command is known a signal is only noted; from then
on it ends the command: ``serve`` and ``broker`` exit 0, as a stop is what the signal asks for
(they take the signals over once they run), any other command 128 + the signal's number, as a
shell reports it (an interrupted ``migrate`` must not read as done)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

from shareproxy.telemetry.logs import quiet_store_pool

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
STOPPED_BY_A_SIGNAL = ("serve", "broker")  # commands that run until asked to stop
_noted: list[int] = []
_raised: list[Interrupted] = []
_stop_is_success = False
# A stop raised where compiled code runs Python on its behalf may never reach the command as
# an exception: pydantic-core (2.18, pydantic 2.7's) turns it into a Rust panic while it builds
# a validator, whose backtrace reaches stderr whatever Python does with it; a Cython module's
# initialisation, part of an import, prints it as "Exception ignored". A stop that lands while
# pydantic or an import is on the stack waits until neither is.
_DEFER_WITHIN = frozenset({"pydantic", "pydantic_core", "importlib"})
# where an event loop runs its callbacks: a stop past them landed in the loop's own work
_LOOP_MODULES = frozenset({"asyncio.events", "asyncio.base_events", "asyncio.runners"})
_RETRY_S = 0.01
_DEFER_AT_MOST_S = 5.0  # a stop is never lost, should either hold the stack for good
_first_deferred: list[float] = []  # when a stop first waited
# What a stopped start still runs (asyncio's cancelling of its tasks, a store connection's
# rollback) may wait on a store driver's thread that waits on a lock for its timeout; a
# watchdog ends the process this long after the stop whatever is still running.
STOP_GRACE_S = 1.0
_stopped = threading.Event()  # a stop was raised (or the command is over): the watchdog wakes
_over = threading.Event()  # the command's outcome is printed: no stop need end it
_over_lock = threading.Lock()


class Interrupted(SystemExit):
    """A stop signal before the command handles signals itself. A ``SystemExit``: asyncio and
    click let it through unchanged (a ``KeyboardInterrupt`` click turns into an exit 130)."""

    def __init__(self, signum: int) -> None:
        super().__init__(0 if _stop_is_success else 128 + signum)
        self.name = signal.Signals(signum).name

    def line(self) -> str:
        if self.code == 0:
            return f"stopped by {self.name} while starting"
        return f"error: interrupted by {self.name}"


def raised() -> Interrupted | None:
    """The stop raised in this command, if one was (and something swallowed it)."""
    return _raised[0] if _raised else None


def within(exc: BaseException) -> Interrupted | None:
    """The stop signal an exception carries. Python wraps what a handler raises in some places
    (an import's ``__set_name__`` becomes a ``RuntimeError`` caused by it), so the chain is read;
    an extension may make its own error of it with no chain at all (pydantic-core, interrupted
    while it builds a validator, raises a ``SchemaError`` naming it), so a stop once raised is
    what any failure after it carries."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, Interrupted):
            return found
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return _raised[0] if _raised else None


def _note(signum: int, frame: FrameType | None) -> None:
    _noted.append(signum)


def _held_off(frame: FrameType | None) -> bool:
    """Whether pydantic or an import is nearer the stop than an event loop: a loop an import
    runs (Alembic runs its migration environment as a module) is not an import in progress."""
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        package = name.partition(".")[0]
        if package in _DEFER_WITHIN:
            return True
        if name in _LOOP_MODULES or package == "uvloop":
            return False
        frame = frame.f_back
    return False


def _defer(signum: int) -> None:
    """Deliver the signal again shortly, to whoever handles it then (``serve`` may have taken
    the signals over meanwhile)."""

    def again(_alarm: int, _frame: FrameType | None) -> None:
        signal.raise_signal(signum)

    signal.signal(signal.SIGALRM, again)
    signal.setitimer(signal.ITIMER_REAL, _RETRY_S)


def _stop(signum: int, frame: FrameType | None) -> None:
    if _raised or _over.is_set():  # a stop under way ends the command, or the command is over
        return
    if _held_off(frame):
        now = time.monotonic()
        _first_deferred[:] = _first_deferred or [now]
        if now - _first_deferred[0] < _DEFER_AT_MOST_S:
            _defer(signum)
            return
    # the stop may cut a coroutine off between its creation and its first await (a store
    # driver's, say): the "never awaited" warning its collection prints is the stop's doing
    warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
    quiet_store_pool()  # and a store connection's reset or close under way
    threading.excepthook = _loop_closed_by_the_stop  # and a driver thread answering too late
    _raise(Interrupted(signum))


def _raise(stop: Interrupted) -> NoReturn:
    _raised.append(stop)
    # Event.set takes the event's own lock: only the watchdog's thread and ``done`` take it,
    # and ``done`` ignores the stop signals first, so no handler can find it held
    _stopped.set()
    raise stop


def _watch(
    raised: list[Interrupted],
    stopped: threading.Event,
    over: threading.Event,
    end_now: Callable[[int], object],
) -> None:
    """The watchdog: started with the command (never from a signal handler, which could find
    ``threading``'s own locks held), it ends a stopped command that has not ended itself
    ``STOP_GRACE_S`` after the stop."""
    stopped.wait()
    if over.wait(STOP_GRACE_S):
        return
    with _over_lock:  # held until the end: the command cannot print its outcome as well
        if over.is_set():
            return
        stop = raised[0]
        with contextlib.suppress(OSError, ValueError):  # a reader gone, or a stream closed
            print(stop.line(), file=sys.stderr)
        end_now(_code(stop))


def _code(stop: Interrupted) -> int:
    return stop.code if isinstance(stop.code, int) else 1


def end(stop: Interrupted) -> NoReturn:
    """The command was stopped while it started: say so once and end."""
    done()  # before the line: a second stop must not cut it off
    try:
        with contextlib.suppress(OSError, ValueError):
            print(stop.line(), file=sys.stderr)
    finally:
        _end(_code(stop))


def _end(code: int) -> NoReturn:
    """End now. A store driver's worker thread (aiosqlite's, not a daemon) may wait where the
    stop left it, on a lock or on a queue no one will feed any more: the interpreter's exit
    would join it, for the lock's timeout or for ever. Nothing a stopped start leaves needs a
    finaliser (the store's transactions roll back on their own)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader gone, or a stream closed
            stream.flush()
    os._exit(code)


def _loop_closed_by_the_stop(args: threading.ExceptHookArgs) -> None:
    """A store driver's thread (aiosqlite's) that answers after the stop closed the event loop
    fails to hand the answer over: that is the stop's doing, not a defect to print."""
    if isinstance(args.exc_value, RuntimeError) and str(args.exc_value) == "Event loop is closed":
        return
    threading.__excepthook__(args)


def arm(command: str | None) -> None:
    """The command is known: a stop signal ends it from now on, and one noted before ends it
    now. Only in a process that ``main`` started (the app run in-process by a test keeps the
    test's handlers)."""
    global _stop_is_success
    if signal.getsignal(signal.SIGTERM) is not _note:
        return
    _stop_is_success = command in STOPPED_BY_A_SIGNAL
    watchdog = threading.Thread(
        target=_watch, args=(_raised, _stopped, _over, _end), name="stop-watchdog", daemon=True
    )
    with contextlib.suppress(RuntimeError):  # no thread to be had: stops still end the command
        watchdog.start()
    for sig in STOP_SIGNALS:
        signal.signal(sig, _stop)
    if _noted:
        _raise(Interrupted(_noted[0]))


def done() -> None:
    """The command is over, its outcome printed: a stop signal now has nothing left to stop.
    Ignored, as the interpreter's finalization would hand it back to the default action, a death
    by the signal that hides the exit code (and so is a deferred one's alarm)."""
    signal.setitimer(signal.ITIMER_REAL, 0)
    for sig in (*STOP_SIGNALS, signal.SIGALRM):
        signal.signal(sig, signal.SIG_IGN)
    with _over_lock:
        _over.set()
    _stopped.set()  # the watchdog, if one waits, has nothing to watch


def catch() -> None:
    """Note stop signals until ``arm``: the first thing the command does."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _note)
