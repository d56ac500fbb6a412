"""Exit codes of every ``shareproxy`` command (the documentation's exit-codes page is generated
from them), and the one table that gives each kind of failure its code. Only the entry points
(the CLI, the batch jobs) import it; everything else raises the kinds in ``core/failures.py``."""

from __future__ import annotations

from shareproxy.core.failures import AddressRefused, BadInput, Failure, Unreachable

OK = 0
FAILED = 1  # it ran, and the answer is no: drift found, schema behind, the API refused, …
USAGE = 2  # a flag, setting, config file or a file it names is wrong; nothing was changed
UNAVAILABLE = 3  # a dependency could not be reached or used: state store, cluster, admin API
CANNOT_LISTEN = 4  # a listen address is in use or not allowed
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT) where stopping is not the command's normal end

# the first kind a failure is an instance of decides its code
CODES: tuple[tuple[type[Failure], int], ...] = (
    (BadInput, USAGE),
    (Unreachable, UNAVAILABLE),
    (AddressRefused, CANNOT_LISTEN),
    (Failure, FAILED),
)


def code_of(failure: Failure) -> int:
    return next(code for kind, code in CODES if isinstance(failure, kind))
