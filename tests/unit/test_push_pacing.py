"""A push endpoint's pace on a virtual clock: full speed while it answers; once it fails, a
doubling back-off (or its Retry-After) and one probe at a time; up again at the first answer
that is not a failure; the outage told once as it begins and once as it ends."""

from __future__ import annotations

from shareproxy.core.push_outcome import judge
from shareproxy.core.push_pacing import MAX_BACKOFF_MS, EndpointChange, EndpointPacing

T = 1_700_000_000_000


def test_an_answering_endpoint_takes_pushes_at_full_speed_even_when_it_refuses_records():
    pace = EndpointPacing()
    assert pace.answered(judge(200, None, T), T) is None
    assert pace.answered(judge(400, None, T), T) is None  # a reject: the endpoint is fine
    assert pace.may_push(T) and pace.in_flight_allowed(16) == 16


def test_a_failing_endpoint_is_probed_after_a_doubling_back_off_and_told_once():
    pace = EndpointPacing()
    assert pace.answered(judge(None, None, T), T) is EndpointChange.DOWN
    assert pace.in_flight_allowed(16) == 1  # one probe at a time
    assert not pace.may_push(T + 99) and pace.may_push(T + 100)
    assert pace.answered(judge(502, None, T + 100), T + 100) is None  # still the same outage
    assert not pace.may_push(T + 299) and pace.may_push(T + 300)  # 200 ms now
    for _ in range(20):
        pace.answered(judge(500, None, T), T)
    assert pace.paused_until_ms == T + MAX_BACKOFF_MS  # bounded
    assert pace.answered(judge(201, None, T + MAX_BACKOFF_MS), T + MAX_BACKOFF_MS) is (
        EndpointChange.UP
    )
    assert pace.in_flight_allowed(16) == 16 and pace.failures == 0


def test_retry_after_holds_the_pushes_back_as_long_as_asked():
    pace = EndpointPacing()
    assert pace.answered(judge(429, "30", T), T) is EndpointChange.DOWN
    assert not pace.may_push(T + 29_999) and pace.may_push(T + 30_000)
    assert pace.last_status == 429


def test_requests_already_under_way_when_the_outage_began_do_not_lengthen_the_back_off():
    """Sixteen requests in flight fail together: one outage, one back-off step, not sixteen."""
    pace = EndpointPacing()
    assert pace.answered(judge(503, None, T), T + 5, T) is EndpointChange.DOWN
    for i in range(15):
        assert pace.answered(judge(503, None, T), T + 6 + i, T) is None
    assert pace.failures == 1 and pace.may_push(T + 105)
    # the probe fails: the back-off doubles
    pace.answered(judge(503, None, T), T + 110, T + 105)
    assert pace.failures == 2 and not pace.may_push(T + 309) and pace.may_push(T + 310)


def test_an_endpoint_that_answers_again_takes_pushes_at_once():
    pace = EndpointPacing()
    for _ in range(10):
        pace.answered(judge(500, None, T), T)
    assert not pace.may_push(T + 1000)
    assert pace.answered(judge(200, None, T), T + 1, T) is EndpointChange.UP
    assert pace.may_push(T + 1)


def test_a_success_sent_before_the_outage_neither_ends_it_nor_cuts_a_retry_after_short():
    pace = EndpointPacing()
    assert pace.answered(judge(429, "10", T), T + 5, T) is EndpointChange.DOWN
    assert pace.answered(judge(200, None, T), T + 6, T) is None  # sent with the 429's window
    assert pace.down and not pace.may_push(T + 9_999) and pace.may_push(T + 10_005)
    assert pace.answered(judge(200, None, T), T + 10_010, T + 10_005) is EndpointChange.UP
