"""Builds named on a benchmark's command line, for the comparisons made in one call.

A build is a checkout of the repository (``git worktree add /tmp/old <commit>``), named
``--build NAME=PATH``. Its proxy is started with the checkout first on ``PYTHONPATH``, from a
directory outside every checkout: ``python -m`` puts the current directory first, so a proxy
started from inside one would import that checkout whatever ``PYTHONPATH`` says.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import tempfile
from pathlib import Path


def checkouts(parser: argparse.ArgumentParser, given: list[str]) -> dict[str, Path]:
    """Each ``NAME=PATH`` as its checkout's root, in the order given; a path that is no
    checkout of shareproxy is the command line's error."""
    builds: dict[str, Path] = {}
    for build in given:
        name, _, path = build.partition("=")
        root = Path(path).resolve()
        if not (root / "shareproxy" / "__init__.py").exists():
            parser.error(f"--build {build}: {root} is not a checkout of shareproxy")
        builds[name] = root
    return builds


def outside_checkouts(prefix: str) -> None:
    """Work from a fresh directory, so no checkout comes before ``PYTHONPATH``; it is removed
    when the benchmark exits."""
    folder = tempfile.mkdtemp(prefix=prefix)
    os.chdir(folder)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
