"""A group's push as its admin sets it: bounds checked once, the stored form read back
exactly, the authorization never shown, and a request's time-out cut to the lock."""

from __future__ import annotations

import pytest

from shareproxy.core.push_spec import LOCK_MARGIN_MS, PushSpec, PushSpecError

URL = "https://hooks.example.com/in"


def test_the_stored_form_reads_back_and_the_authorization_is_never_shown():
    spec = PushSpec(URL, ("orders", "refunds"), 8, 5000, "Bearer abc")
    assert PushSpec.from_stored(spec.stored()) == spec
    shown = spec.shown()
    assert shown["authorization"] == "set" and "abc" not in repr(shown)
    assert PushSpec(URL, ("orders",)).shown()["authorization"] is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"topics": ()}, "at least one topic"),
        ({"topics": ("a", "a")}, "twice"),
        ({"topics": ("bad name",)}, "topics:"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"max_in_flight": 1025}, "max_in_flight"),
        ({"timeout_ms": 99}, "timeout_ms"),
        ({"authorization": ""}, "authorization"),
        ({"authorization": "Bearer a\\nb"}, "printable"),
    ],
)
def test_a_push_out_of_bounds_is_refused_with_its_reason(change, problem):
    fields = {"url": URL, "topics": ("orders",), **change}
    if "authorization" in change:
        fields["authorization"] = change["authorization"].replace("\\n", "\n")
    with pytest.raises(PushSpecError, match=problem):
        PushSpec(**fields)


def test_a_request_ends_before_the_lock_of_its_record():
    spec = PushSpec(URL, ("orders",), timeout_ms=30_000)
    assert spec.timeout_within(60_000) == 30_000
    assert spec.timeout_within(10_000) == 10_000 - LOCK_MARGIN_MS
    assert spec.timeout_within(LOCK_MARGIN_MS) == 0  # too late: not sent at all
