"""Lines a client can cause are rate-limited per kind, a defect's tracebacks too (its
exception and the line that raised it are part of its kind). A dependency that is down is one
warning per outage."""

from __future__ import annotations

import logging
import sys

from shareproxy.core.errors import ErrorCode
from shareproxy.telemetry.logs import Outage, RateLimit
from tests.support.listener_context import listener_only


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_of_one_kind_are_limited_per_window_and_the_next_window_counts_the_rest():
    clock = Clock()
    f = RateLimit(burst=2, window_s=0.25, clock=clock)

    def line(msg: str, level: int = logging.WARNING) -> logging.LogRecord:
        return logging.LogRecord("x", level, __file__, 1, msg, ("a",), None)

    assert [f.filter(line("closing %s")) for _ in range(5)] == [True, True, False, False, False]
    assert f.filter(line("other %s"))  # another kind has its own budget
    clock.now += 0.125
    assert not f.filter(line("closing %s"))  # the window has not passed
    clock.now += 0.125
    first = line("closing %s")
    assert f.filter(first)
    assert first.getMessage() == "closing a [4 more like this not logged]"


def _defect(kind: type[Exception]) -> logging.LogRecord:
    try:
        raise kind("a defect")
    except Exception:
        return logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "%s failed", ("ShareFetch",), sys.exc_info()
        )


def test_a_defect_that_fails_every_retry_the_same_way_is_logged_a_burst_per_window():
    clock = Clock()
    f = RateLimit(burst=3, window_s=0.2, clock=clock)
    assert [f.filter(_defect(KeyError)) for _ in range(50)] == [True] * 3 + [False] * 47
    assert f.filter(_defect(TypeError))  # another exception is a new defect: it shows
    clock.now += 0.25
    first = _defect(KeyError)
    assert f.filter(first)
    assert first.getMessage() == "ShareFetch failed [47 more like this not logged]"
    assert first.exc_info is not None  # the traceback still goes with it


def test_the_listener_logs_a_failing_handler_a_few_times_however_often_clients_retry(caplog):
    from types import SimpleNamespace

    from shareproxy.kafka.listener import KafkaListener
    from shareproxy.protocol.api_keys import ApiKey

    listener = KafkaListener(listener_only(), "127.0.0.1", 0)
    conn = SimpleNamespace(client_host="10.0.0.7")
    request = SimpleNamespace(api_key=ApiKey.SHARE_FETCH, api_version=1)
    answers = []
    with caplog.at_level(logging.ERROR, logger="shareproxy.kafka.listener"):
        for _ in range(1_000):
            try:
                raise AttributeError("a defect in a handler")
            except AttributeError as exc:
                answers.append(listener._failed(conn, request, exc))  # type: ignore[arg-type]
    assert {a.error_code for a in answers} == {ErrorCode.UNKNOWN_SERVER_ERROR}
    logged = [r for r in caplog.records if "answered UNKNOWN_SERVER_ERROR" in r.getMessage()]
    assert 1 <= len(logged) <= 20 and all(r.exc_info for r in logged)


def test_plain_lines_carry_the_events_fields_as_json_lines_do():
    import logging

    from shareproxy.core.store import SharePartitionKey
    from shareproxy.telemetry.logs import PlainFormatter

    record = logging.makeLogRecord(
        {
            "name": "shareproxy.runtime.groups.coordinator",
            "levelname": "INFO",
            "msg": "member joined",
            "group": "orders",
            "member": "m-1",
            "topics": ["a", "b"],
            "client_id": "my app",
        }
    )
    line = PlainFormatter().format(record)
    assert line.endswith('member joined group=orders member=m-1 topics=a,b client_id="my app"'), (
        line
    )
    key = SharePartitionKey("orders", __import__("uuid").UUID(int=1), 3)
    assert "SharePartitionKey(" not in str(key) and "UUID(" not in str(key)


def test_an_outage_is_one_warning_when_it_starts_and_one_line_when_it_ends(caplog):
    outage = Outage("the state store", logging.getLogger("test.outage"))
    with caplog.at_level(logging.INFO, logger="test.outage"):
        for i in range(50):
            outage.failed(f"round {i}", "connection refused")
        assert outage.down
        outage.answered()
        outage.answered()
        outage.failed("round 51", "connection refused")
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in lines] == ["WARNING", "INFO", "WARNING"]
    assert "(round 0): connection refused" in lines[0][1]
    assert "50 calls failed meanwhile" in lines[1][1]


def test_the_upstream_clients_connection_errors_are_a_few_warnings_per_window():
    import logging

    from shareproxy.telemetry.logs import UpstreamClientLog

    limit = UpstreamClientLog()

    def record(name: str, level: int) -> logging.LogRecord:
        return logging.makeLogRecord(
            {
                "name": name,
                "levelno": level,
                "levelname": logging.getLevelName(level),
                "msg": "Unable connect to node with id %s: %s",
                "args": (111, "refused"),
            }
        )

    passed = [r for r in (record("aiokafka", logging.ERROR) for _ in range(50)) if limit.filter(r)]
    assert len(passed) == 3 and {r.levelname for r in passed} == {"WARNING"}
    own = record("shareproxy.runtime", logging.ERROR)
    assert all(limit.filter(own) for _ in range(50)) and own.levelname == "ERROR"
