"""A stop signal while the command starts ends it with one line, however Python wraps it."""

from __future__ import annotations

import signal

import pytest

from shareproxy.cli import app, launch, signals


@pytest.fixture(autouse=True)
def _test_handlers_kept():
    """``launch.main`` catches the stop signals; the test process gets its own back."""
    kept = {sig: signal.getsignal(sig) for sig in signals.STOP_SIGNALS}
    yield
    for sig, handler in kept.items():
        signal.signal(sig, handler)


class _StoppedWhileNamed:
    """Raises as a signal handler would, in the middle of an import's class body."""

    def __set_name__(self, owner: type, name: str) -> None:
        raise signals.Interrupted(signal.SIGTERM)


def _import_stopped() -> None:
    class Entity:  # Python 3.11 wraps the exception of __set_name__ in a RuntimeError
        field = _StoppedWhileNamed()


def test_a_stop_wrapped_by_an_import_is_still_a_stop(monkeypatch, capsys):
    monkeypatch.setattr(app, "main", _import_stopped)
    with pytest.raises(SystemExit) as exited:
        launch.main()
    assert exited.value.code == 128 + signal.SIGTERM
    assert capsys.readouterr().err == "error: interrupted by SIGTERM\n"


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
