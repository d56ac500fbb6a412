"""A group's push as its admin sets it: bounds checked once, the stored form read back
exactly, the authorization never shown, and a request's time-out cut to the lock."""

from __future__ import annotations

import pytest

from shareproxy.core.push_spec import LOCK_MARGIN_MS, PushSpec, PushSpecError
from shareproxy.core.store import StoreUnavailable
from shareproxy.runtime.groups.group_pushes import GroupPushes
from tests.support.memory_store import MemoryStore

URL = "https://hooks.example.com/in"


def test_the_stored_form_reads_back_and_the_authorization_is_never_shown():
    spec = PushSpec(URL, ("orders", "refunds"), 8, 5000, "Bearer abc")
    assert PushSpec.from_stored(spec.stored()) == spec
    shown = spec.shown()
    assert shown["authorization"] == "set" and "abc" not in repr(shown)
    assert PushSpec(URL, ("orders",)).shown()["authorization"] is None
    assert "abc" not in repr(spec)


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
        ({"authorization": " Bearer a"}, "no space around"),
        ({"url": "https://hooks.example.com/in/ümlaut"}, "ASCII"),
        ({"url": "https://hooks.example.com/in "}, "without spaces"),
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


async def test_a_change_read_while_the_store_is_down_is_read_again_once_it_answers():
    store = MemoryStore()
    pushes = GroupPushes(store, store.configs_version)
    await pushes.refresh()
    await store.set_push("g", PushSpec(URL, ("orders",)).stored())
    reads = 0
    real = store.pushes

    async def failing() -> dict:
        nonlocal reads
        reads += 1
        raise StoreUnavailable("down")

    store.pushes = failing  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable):
        await pushes.refresh()
    store.pushes = real  # type: ignore[method-assign]
    await pushes.refresh()
    assert reads == 1 and pushes.has_push("g")
