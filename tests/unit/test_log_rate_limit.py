"""Lines a client can cause are rate-limited per kind; errors never are. A dependency that is
down is one warning per outage."""

from __future__ import annotations

import logging
import time

from shareproxy.logs import Outage, RateLimit


def test_lines_of_one_kind_are_limited_per_window_and_the_next_window_counts_the_rest():
    f = RateLimit(burst=2, window_s=0.2)

    def line(msg: str, level: int = logging.WARNING) -> logging.LogRecord:
        return logging.LogRecord("x", level, __file__, 1, msg, ("a",), None)

    assert [f.filter(line("closing %s")) for _ in range(5)] == [True, True, False, False, False]
    assert f.filter(line("other %s"))  # another kind has its own budget
    assert f.filter(line("closing %s", logging.ERROR))  # errors always pass
    time.sleep(0.25)
    first = line("closing %s")
    assert f.filter(first)
    assert first.getMessage() == "closing a [3 more like this not logged]"


def test_plain_lines_carry_the_events_fields_as_json_lines_do():
    import logging

    from shareproxy.core.store import SharePartitionKey
    from shareproxy.logs import PlainFormatter

    record = logging.makeLogRecord(
        {
            "name": "shareproxy.broker.coordinator",
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

    from shareproxy.logs import UpstreamClientLog

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
    own = record("shareproxy.broker", logging.ERROR)
    assert all(limit.filter(own) for _ in range(50)) and own.levelname == "ERROR"
