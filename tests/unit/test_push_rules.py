"""Push delivery's pure rules: an endpoint's answer decides each record's fate (2xx accepts;
408, 429, 5xx or no answer releases; any other 4xx rejects; Retry-After honoured on 429 and
503), and the proxy pushes only to URLs under an operator's allowed prefixes, matched as URLs."""

from __future__ import annotations

import pytest

from shareproxy.core.push_outcome import (
    MAX_RETRY_AFTER_MS,
    PushAnswer,
    PushOutcome,
    judge,
    outcome_of,
    retry_after_ms,
)
from shareproxy.core.states import AcknowledgeType
from shareproxy.settings.push_targets import PushTargetError, PushTargets

NOW = 1_700_000_000_000  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize(
    ("status", "outcome", "ack"),
    [
        (200, PushOutcome.ACCEPTED, AcknowledgeType.ACCEPT),
        (204, PushOutcome.ACCEPTED, AcknowledgeType.ACCEPT),
        (408, PushOutcome.RELEASED, AcknowledgeType.RELEASE),
        (429, PushOutcome.RELEASED, AcknowledgeType.RELEASE),
        (500, PushOutcome.RELEASED, AcknowledgeType.RELEASE),
        (503, PushOutcome.RELEASED, AcknowledgeType.RELEASE),
        (302, PushOutcome.RELEASED, AcknowledgeType.RELEASE),  # a moved endpoint: not a verdict
        (400, PushOutcome.REJECTED, AcknowledgeType.REJECT),
        (404, PushOutcome.REJECTED, AcknowledgeType.REJECT),
        (422, PushOutcome.REJECTED, AcknowledgeType.REJECT),
        (None, PushOutcome.TIMED_OUT, AcknowledgeType.RELEASE),
    ],
)
def test_the_status_decides_the_records_fate(status, outcome, ack):
    assert outcome_of(status) is outcome
    assert outcome.acknowledge_type is ack


def test_retry_after_is_seconds_or_an_http_date_and_bounded():
    assert retry_after_ms("120", NOW) == 120_000
    assert retry_after_ms(" 5 ", NOW) == 5_000
    assert retry_after_ms("Tue, 14 Nov 2023 22:14:20 GMT", NOW) == 60_000
    assert retry_after_ms("Tue, 14 Nov 2023 22:00:00 GMT", NOW) == 0  # past
    assert retry_after_ms("86400", NOW) == MAX_RETRY_AFTER_MS  # a day: held to the bound
    assert retry_after_ms("9" * 5000, NOW) == MAX_RETRY_AFTER_MS  # no 5,000-digit int made
    for unreadable in (None, "", "-5", "soon", "1.5", "Tue, 14 Nov 2023 22:14:20", "\u00b2"):
        assert retry_after_ms(unreadable, NOW) == 0  # ("²": a digit to Python, not to HTTP)


def test_retry_after_is_honoured_on_429_and_503_only():
    assert judge(429, "10", NOW) == PushAnswer(PushOutcome.RELEASED, 429, 10_000)
    assert judge(503, "10", NOW) == PushAnswer(PushOutcome.RELEASED, 503, 10_000)
    assert judge(500, "10", NOW).retry_after_ms == 0
    assert judge(200, "10", NOW) == PushAnswer(PushOutcome.ACCEPTED, 200, 0)


def test_an_endpoint_fails_when_it_cannot_serve_not_when_it_refuses_a_record():
    assert judge(None, None, NOW).endpoint_failing
    assert judge(502, None, NOW).endpoint_failing and judge(429, None, NOW).endpoint_failing
    assert not judge(400, None, NOW).endpoint_failing
    assert not judge(200, None, NOW).endpoint_failing


ALLOWED = PushTargets.parse("https://hooks.example.com/in, http://10.0.0.5:8080")


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/in",
        "https://hooks.example.com/in/",
        "https://hooks.example.com/in/orders?x=1",
        "https://HOOKS.example.com:443/in/orders",
        "http://10.0.0.5:8080/anything",
    ],
)
def test_a_url_under_an_allowed_prefix_may_be_pushed_to(url):
    ALLOWED.check(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com.evil.net/in",  # a string prefix, not the host
        "https://hooks.example.com/inside",  # not at a segment boundary
        "http://hooks.example.com/in",  # another scheme
        "https://hooks.example.com:8443/in",  # another port
        "https://hooks.example.com/in/../admin",  # leaves the path where the server resolves it
        "https://hooks.example.com/in/%2e%2e/admin",
        "https://hooks.example.com/in/x%2F..%2F..%2Fadmin",  # a server decoding slashes first
        "https://user:pw@hooks.example.com/in",  # credentials belong in the authorization
        "http://10.0.0.5/anything",  # port 80, not 8080
        "ftp://hooks.example.com/in",
        "hooks.example.com/in",
        "https:///in",
        "http://[::1/in",
    ],
)
def test_any_other_url_is_refused_with_the_reason(url):
    with pytest.raises(PushTargetError, match=r"URL|segment|credentials|host"):
        ALLOWED.check(url)


def test_no_prefix_listed_turns_push_off_and_a_wrong_prefix_fails_at_start():
    off = PushTargets.parse("")
    assert not off.enabled
    with pytest.raises(PushTargetError, match="push is off"):
        off.check("https://hooks.example.com/in")
    with pytest.raises(PushTargetError, match="not an http or https URL"):
        PushTargets.parse("hooks.example.com")
