"""The kinds of failure a user can act on, named once for every layer. Each entry point turns a
kind into its own answer (the CLI and the batch jobs an exit code, ``host/exits.py``); nothing
below them knows those answers. ``str()`` is what to print: one line per thing that failed,
naming the value that made it fail, so a typo reads differently from an outage."""

from __future__ import annotations


class Failure(Exception):
    """It ran, and the answer is no."""


class BadInput(Failure):
    """A value the user gave (a flag, a setting, a file it names) is wrong; nothing was
    changed."""


class Unreachable(Failure):
    """A dependency (the state store, the cluster, an admin API) could not be reached or
    used."""


class AddressRefused(Failure):
    """A listen address is in use or not allowed."""
