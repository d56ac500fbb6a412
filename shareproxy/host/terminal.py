"""Standard output that survives a pipe: on a terminal, tables fit its width and wrap their
cells; anywhere else (a file, a pipe, cron) rich would assume 80 columns and cut names to
``bars…``, so lines are as long as their content instead."""

from __future__ import annotations

from rich.console import Console

NOT_A_TERMINAL_WIDTH = 1 << 16  # no table row of ours comes near it


def stdout() -> Console:
    """A console for results on stdout (progress and errors go to stderr)."""
    if Console().is_terminal:
        return Console(soft_wrap=True)
    return Console(soft_wrap=True, width=NOT_A_TERMINAL_WIDTH)
