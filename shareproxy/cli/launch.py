"""The ``shareproxy`` command's entry (the console script, ``python -m shareproxy.cli``): stop
signals are caught before anything heavy is imported (``signals``), then the command runs."""

from __future__ import annotations

import sys

from shareproxy.cli import signals


def main() -> None:
    signals.catch()
    # kio registers Hypothesis strategies for its types whenever it can import Hypothesis (in a
    # test environment): a tenth of a node's start-up CPU, for examples no command ever draws
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    try:
        _command()
    except signals.Interrupted as stop:  # landed once the outcome was known, before done()
        signals.end(stop)


def _command() -> None:
    try:
        from shareproxy.cli.app import main as run

        run()
    except BaseException as exc:
        stop = signals.within(exc)
        if stop is None:
            raise
        signals.end(stop)
    else:
        swallowed = signals.raised()
        if swallowed is not None:  # ended as stopped, not by the interpreter's exit
            signals.end(swallowed)
    finally:
        signals.done()
