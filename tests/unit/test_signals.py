"""A stop signal while the command starts ends it with one line, however Python wraps it."""

from __future__ import annotations

import contextlib
import importlib
import logging
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pydantic
import pytest
from pydantic_core import core_schema

from shareproxy.cli import app, launch, signals


@pytest.fixture(autouse=True)
def _test_handlers_kept():
    """``launch.main`` catches the stop signals; the test process gets its own back."""
    kept = {sig: signal.getsignal(sig) for sig in (*signals.STOP_SIGNALS, signal.SIGALRM)}
    yield
    for sig, handler in kept.items():
        signal.signal(sig, handler)


@pytest.fixture(autouse=True)
def _stops_raise(monkeypatch):
    """A stopped start ends the process at once; here it raises, for the test to see, and the
    stop's watchdog (a thread of its own) only notes that it would have ended it."""
    ended: list[int] = []

    def end(code: int) -> None:
        ended.append(code)
        if threading.current_thread() is threading.main_thread():
            raise SystemExit(code)

    _fresh_stops(monkeypatch)
    over, stopped = threading.Event(), threading.Event()
    monkeypatch.setattr(signals, "_end", end)
    monkeypatch.setattr(signals, "_over", over)
    monkeypatch.setattr(signals, "_stopped", stopped)
    yield ended
    over.set()  # a watchdog the test started stands down
    stopped.set()


def test_a_stopped_start_does_not_wait_on_a_thread_the_stop_left_blocked():
    """A driver's worker thread that is no daemon, blocked for good where the stop left it, does
    not keep the stopped command alive."""
    program = """if True:
        import signal, sys, threading
        from shareproxy.cli import app, launch, signals

        def command():
            threading.Thread(target=threading.Event().wait).start()  # never set
            raise signals.Interrupted(signal.SIGINT)

        app.main = command
        launch.main()
    """
    run = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=30
    )
    assert (run.returncode, run.stdout, run.stderr) == (130, "", "error: interrupted by SIGINT\n")


def test_a_stop_ends_a_start_that_cleaning_up_holds_up():
    """What a stopped start still runs (asyncio cancelling its tasks, a store connection's
    rollback waiting on a locked database) does not keep it from ending soon after the stop."""
    program = """if True:
        import signal, sys, threading, time
        from shareproxy.cli import app, launch, signals

        def command():
            signals.arm("migrate")
            try:
                signal.raise_signal(signal.SIGINT)
            finally:
                time.sleep(60)  # a cleanup that waits on a lock

        app.main = command
        launch.main()
    """
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=30
    )
    assert (run.returncode, run.stdout, run.stderr) == (130, "", "error: interrupted by SIGINT\n")
    assert time.monotonic() - started < 10


def _fresh_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """No stop noted, raised or waiting from an earlier test, and what a stop changes in the
    process put back after this one."""
    monkeypatch.setattr(signals, "_noted", [])
    monkeypatch.setattr(signals, "_raised", [])
    monkeypatch.setattr(signals, "_first_deferred", [], raising=False)
    monkeypatch.setattr(signals, "_stop_is_success", False)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    pool = logging.getLogger("sqlalchemy.pool")
    monkeypatch.setattr(pool, "level", pool.level)


def _until_the_stop_lands() -> None:
    """The command's rest: it waits for the held stop, which ends it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.001)
    raise AssertionError("the stop never landed")


class _StoppedWhileNamed:
    """Raises as a signal handler would, in the middle of an import's class body."""

    def __set_name__(self, owner: type, name: str) -> None:
        raise signals.Interrupted(signal.SIGTERM)


def _import_stopped() -> None:
    class Entity:  # Python 3.11 wraps the exception of __set_name__ in a RuntimeError
        field = _StoppedWhileNamed()


def _ends_stopped_by(signum: int, capsys: pytest.CaptureFixture[str]) -> None:
    """``launch.main`` ends as a stop by ``signum`` does: its exit code and its one line."""
    with pytest.raises(SystemExit) as exited:
        launch.main()
    assert exited.value.code == 128 + signum
    assert capsys.readouterr().err == f"error: interrupted by {signal.Signals(signum).name}\n"


def test_a_stop_wrapped_by_an_import_is_still_a_stop(monkeypatch, capsys):
    monkeypatch.setattr(app, "main", _import_stopped)
    _ends_stopped_by(signal.SIGTERM, capsys)


def test_other_failures_pass_through(monkeypatch):
    def broken() -> None:
        raise RuntimeError("not a signal")

    monkeypatch.setattr(app, "main", broken)
    with pytest.raises(RuntimeError, match="not a signal"):
        launch.main()


def test_an_exit_code_passes_through(monkeypatch):
    def exits() -> None:
        raise SystemExit(2)

    monkeypatch.setattr(app, "main", exits)
    with pytest.raises(SystemExit) as exited:
        launch.main()
    assert exited.value.code == 2


def test_a_stop_an_extension_made_its_own_error_of_is_still_a_stop(monkeypatch, capsys):
    """pydantic-core, interrupted while it builds a validator, raises a ``SchemaError`` that only
    names the stop: no cause, no context."""
    monkeypatch.setattr(signals, "_noted", [])
    monkeypatch.setattr(signals, "_raised", [])

    def serve_interrupted_in_an_extension() -> None:
        signals.arm("serve")
        try:
            signal.raise_signal(signal.SIGINT)
        except signals.Interrupted as exc:
            named = f"Error building validator: {type(exc).__name__}: {exc}"
        raise ValueError(named)

    monkeypatch.setattr(app, "main", serve_interrupted_in_an_extension)
    with pytest.raises(SystemExit) as exited:
        launch.main()
    assert exited.value.code == 0
    assert capsys.readouterr().err == "stopped by SIGINT while starting\n"


@pytest.mark.parametrize("outcome", ["done", "failed"])
def test_a_stop_after_the_command_is_ignored_not_a_death_by_the_signal(monkeypatch, outcome):
    """Once the command is over, the interpreter's finalization would hand a stop signal back to
    the default action: a migrate that printed "migrated" would die by SIGINT at the last moment
    and report no exit code at all."""

    def command() -> None:
        if outcome == "failed":
            raise SystemExit(1)

    monkeypatch.setattr(app, "main", command)
    if outcome == "failed":
        with pytest.raises(SystemExit):
            launch.main()
    else:
        launch.main()
    assert all(signal.getsignal(sig) is signal.SIG_IGN for sig in signals.STOP_SIGNALS)


def test_a_stop_waits_until_pydantic_has_built_its_validator(monkeypatch, capsys):
    """A stop raised while pydantic builds a model is, in older pydantic-core releases, a Rust
    panic whose backtrace reaches stderr whatever Python makes of it: the stop lands once
    pydantic is off the stack, still one line and 128 + the signal."""
    _fresh_stops(monkeypatch)
    built: list[str] = []

    class SignalledWhileBuilt:
        @classmethod
        def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
            signal.raise_signal(signal.SIGTERM)
            built.append("schema")
            return core_schema.int_schema()

    def migrate_interrupted_while_a_model_is_built() -> None:
        signals.arm("migrate")
        pydantic.create_model("Settings", field=(SignalledWhileBuilt, ...))
        built.append("model")
        _until_the_stop_lands()

    monkeypatch.setattr(app, "main", migrate_interrupted_while_a_model_is_built)
    with pytest.raises(SystemExit) as exited:
        launch.main()
    assert built == ["schema", "model"]
    assert exited.value.code == 128 + signal.SIGTERM
    assert capsys.readouterr().err == "error: interrupted by SIGTERM\n"


def test_a_stop_the_command_swallowed_still_ends_it_as_stopped(monkeypatch, capsys):
    """Code that catches every exception, a stop's among them, and goes on to return does not
    turn the stop into a plain exit: the interpreter's exit would wait on the store driver's
    thread the stop left behind."""

    def swallowing() -> None:
        signals.arm("migrate")
        with contextlib.suppress(BaseException):  # as too broad a handler in a library would
            signal.raise_signal(signal.SIGINT)
        raise SystemExit(0)  # as the app does when its command returns

    monkeypatch.setattr(app, "main", swallowing)
    _ends_stopped_by(signal.SIGINT, capsys)


def test_a_stop_as_the_command_ends_still_prints_its_line(monkeypatch, capsys):
    """A stop that lands once the command's outcome is known, before the stop signals are
    ignored, still ends it with the one line."""

    def finished() -> None:
        signals.arm("migrate")

    def done_stopped() -> None:
        monkeypatch.setattr(signals, "done", real_done)
        raise signals.Interrupted(signal.SIGINT)

    real_done = signals.done
    monkeypatch.setattr(app, "main", finished)
    monkeypatch.setattr(signals, "done", done_stopped)
    _ends_stopped_by(signal.SIGINT, capsys)


def test_a_second_stop_does_not_cut_the_first_short(monkeypatch):
    """Once a stop is on its way out, another (a second Ctrl-C) is left to it and to the
    watchdog: raised again, it would escape the line and the exit the first one is taking."""
    _fresh_stops(monkeypatch)
    with pytest.raises(signals.Interrupted):
        signals._stop(signal.SIGINT, None)
    assert signals._stop(signal.SIGINT, None) is None
    assert len(signals._raised) == 1


def test_a_driver_thread_answering_after_the_stop_closed_the_loop_prints_nothing(
    monkeypatch, capsys
):
    """aiosqlite's thread hands its answer to the event loop: after a stop closed the loop, that
    fails in the thread, which Python would print as a traceback. Other failures still print."""
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.setattr(signals, "_raised", [])
    with pytest.raises(signals.Interrupted):
        signals._stop(signal.SIGTERM, None)

    def fails(exc: BaseException) -> None:
        def run() -> None:
            raise exc

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()

    fails(RuntimeError("Event loop is closed"))
    assert capsys.readouterr().err == ""
    fails(ZeroDivisionError("a defect"))
    assert "ZeroDivisionError: a defect" in capsys.readouterr().err


def test_a_stop_waits_until_the_import_under_way_has_ended(monkeypatch, capsys, tmp_path):
    """A Cython module's initialisation, part of an import, prints a stop raised inside it as
    "Exception ignored" with a traceback: the stop lands once no import is under way."""
    _fresh_stops(monkeypatch)
    (tmp_path / "stopped_while_imported.py").write_text(
        "import signal\nsignal.raise_signal(signal.SIGINT)\nIMPORTED = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "stopped_while_imported", raising=False)
    imported: list[bool] = []

    def migrate_interrupted_while_importing() -> None:
        signals.arm("migrate")
        imported.append(importlib.import_module("stopped_while_imported").IMPORTED)
        _until_the_stop_lands()

    monkeypatch.setattr(app, "main", migrate_interrupted_while_importing)
    with pytest.raises(SystemExit) as exited:
        launch.main()
    assert imported == [True]
    assert exited.value.code == 128 + signal.SIGINT
    assert capsys.readouterr().err == "error: interrupted by SIGINT\n"
