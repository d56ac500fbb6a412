"""Log set-up: plain lines for a terminal, or one JSON object per line for a log pipeline.

Fields passed with ``extra=`` (group, member, topic, partition, …) become JSON keys, so events
can be filtered without parsing messages. Nothing here sees credentials: callers log URLs with
their passwords hidden.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from shareproxy.telemetry.secrets import hide_passwords

LogFormat = Literal["plain", "json"]

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def _fields(record: logging.LogRecord) -> dict[str, object]:
    """The fields a record was given with ``extra=``."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class PlainFormatter(logging.Formatter):
    """One line per event: the message, then each of its fields as ``key=value`` (quoted
    where the value has spaces), so a terminal shows what JSON logs carry."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return hide_passwords(super().format(record))  # an exception's text may quote a URL

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        for key, value in _fields(record).items():
            text = _plain(value)
            line += f" {key}={json.dumps(text) if not text or ' ' in text else text}"
        return line


def _plain(value: object) -> str:
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(_plain(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}:{_plain(v)}" for k, v in value.items())
    return str(value)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _fields(record).items():
            entry[key] = value if isinstance(value, int | float | bool | None) else str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return hide_passwords(json.dumps(entry, ensure_ascii=False))


class RateLimit(logging.Filter):
    """At most ``burst`` lines of one kind (logger and message template) per ``window_s``: a
    client sending malformed requests in a loop must not fill the disk, nor must a defect that
    fails every retry of a request the same way. An exception's type and the line that raised
    it are part of its line's kind, so a new defect always shows. The first line of the next
    window says how many were left out."""

    def __init__(
        self, burst: int = 20, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self.clock = clock
        self._kinds: dict[tuple[object, ...], tuple[float, int, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.msg, *_raised_at(record))
        now = self.clock()
        start, count, left_out = self._kinds.get(key, (now, 0, 0))
        if now - start >= self.window_s:
            if left_out:
                record.msg = f"{record.msg} [{left_out} more like this not logged]"
            start, count, left_out = now, 0, 0
        if count < self.burst:
            self._kinds[key] = (start, count + 1, left_out)
            return True
        self._kinds[key] = (start, count, left_out + 1)
        return False


def _raised_at(record: logging.LogRecord) -> tuple[object, ...]:
    """The exception's type and the file and line that raised it; empty without one."""
    if not record.exc_info or record.exc_info[1] is None:
        return ()
    exc = record.exc_info[1]
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return (type(exc),)
    return (type(exc), tb.tb_frame.f_code.co_filename, tb.tb_lineno)


class Outage:
    """A dependency that stops answering is logged once per outage: a warning when it starts
    failing, one line when it answers again, and the failures between counted rather than
    logged (every loop retrying a store that is down would otherwise log each try)."""

    def __init__(self, what: str, logger: logging.Logger) -> None:
        self.what = what
        self._log = logger
        self._since: float | None = None
        self._failures = 0

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, doing: str, problem: str) -> None:
        """``doing`` failed because the dependency did not answer (``problem``, one line)."""
        self._failures += 1
        if self._since is None:
            self._since = time.monotonic()
            self._log.warning(
                "%s cannot be reached (%s): %s; retrying, and saying so once it answers",
                self.what,
                doing,
                problem,
            )

    def answered(self) -> None:
        """A call to the dependency succeeded: an outage under way is over."""
        if self._since is None:
            return
        self._log.info(
            "%s answers again after %.1f s (%d calls failed meanwhile)",
            self.what,
            time.monotonic() - self._since,
            self._failures,
        )
        self._since, self._failures = None, 0


# the running proxy's state store: whatever finds it down or back reports here, so an outage is
# one warning and one line when it ends, however many loops and requests retried meanwhile
STORE_OUTAGE = Outage("the state store", logging.getLogger("shareproxy.store"))


class UpstreamClientLog(RateLimit):
    """aiokafka logs every failed connection attempt to the cluster as an ERROR, several a
    second while a broker is down. That is a dependency's outage, which the proxy answers
    retriably and reports itself: its lines are warnings here, a few of a kind per window."""

    def __init__(self) -> None:
        super().__init__(burst=3, window_s=30.0)

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("aiokafka"):
            return True
        if record.levelno == logging.ERROR:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return super().filter(record)


def quiet_store_pool() -> None:
    """A stop cancels the store's work where it stands, a connection's reset or close among it
    (a rollback, aiosqlite's close): SQLAlchemy's pool logs that cancellation as an error with
    its traceback. Once a command is stopping, that is the stop's doing, not a defect."""
    logging.getLogger("sqlalchemy.pool").setLevel(logging.CRITICAL)


def configure(level: str = "INFO", fmt: LogFormat = "plain") -> None:
    """Route the proxy's, uvicorn's and aiokafka's loggers to stderr in one format."""
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(PlainFormatter())
    handler.addFilter(UpstreamClientLog())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # Python warnings as log lines too, in the same format


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
