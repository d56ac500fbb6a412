"""Exit codes of every ``shareproxy`` command (the README lists them), and the errors that carry
one: each is reported as one line naming what failed and the value that made it fail, so a
script or an operator can tell a typo from an outage without reading a traceback."""

from __future__ import annotations

OK = 0
FAILED = 1  # it ran, and the answer is no: drift found, schema behind, the API refused, …
USAGE = 2  # a flag, setting, config file or a file it names is wrong; nothing was changed
UNAVAILABLE = 3  # a dependency could not be reached or used: state store, cluster, admin API
CANNOT_LISTEN = 4  # a listen address is in use or not allowed
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT) where stopping is not the command's normal end


class CommandError(Exception):
    """A failure the user can act on; ``str()`` is the one line to print."""

    exit_code = FAILED


class UsageError(CommandError):
    exit_code = USAGE


class Unavailable(CommandError):
    exit_code = UNAVAILABLE


class CannotListen(CommandError):
    exit_code = CANNOT_LISTEN


def first_line(exc: BaseException) -> str:
    """The most telling line of an exception chain: the innermost cause's message, with its
    class name when the message alone is empty or vague (``[Errno 111] …`` says enough)."""
    inner: BaseException = exc
    while inner.__cause__ is not None or (
        inner.__context__ is not None and not inner.__suppress_context__
    ):
        following = inner.__cause__ or inner.__context__
        assert following is not None, "the loop's condition: one of them is set"
        inner = following
    text = next((line.strip() for line in str(inner).splitlines() if line.strip()), "")
    return text or type(inner).__name__
