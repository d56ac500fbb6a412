"""Requests the proxy handled during a drain, per 1,000 records delivered, read from its own
Prometheus metrics: every per-request cost (decode, use case, answer, a store commit, an
upstream Fetch) is paid this often, so a drop here cuts them all at once."""

from __future__ import annotations

from collections import Counter

import httpx
from prometheus_client.parser import text_string_to_metric_families

# what is counted: (metric sample name, label to split by or None), and how it is shown
COUNTED = {
    ("shareproxy_requests_total", "ShareFetch"): "ShareFetch",
    ("shareproxy_requests_total", "ShareAcknowledge"): "ShareAcknowledge",
    ("shareproxy_upstream_fetch_duration_seconds_count", None): "upstream Fetch",
    ("shareproxy_store_commit_duration_seconds_count", None): "store commit",
}


def scrape(admin_url: str) -> Counter[str]:
    """The counts now, by what ``COUNTED`` names them."""
    text = httpx.get(f"{admin_url}/metrics", timeout=30).text
    seen: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for (name, api), shown in COUNTED.items():
                if sample.name == name and (api is None or sample.labels.get("api") == api):
                    seen[shown] += int(sample.value)
    return seen


def answered_by_api(admin_url: str) -> Counter[str]:
    """Every request the proxy answered so far, by API (its ``shareproxy_requests`` counter)."""
    text = httpx.get(f"{admin_url}/metrics", timeout=30).text
    seen: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "shareproxy_requests_total":
                seen[sample.labels["api"]] += int(sample.value)
    return seen


def per_thousand(before: Counter[str], after: Counter[str], records: int) -> str:
    """``ShareFetch 1.5, ShareAcknowledge 0.0, …`` per 1,000 records delivered."""
    scale = 1000 / max(records, 1)
    return ", ".join(
        f"{shown} {(after[shown] - before[shown]) * scale:.2f}" for shown in COUNTED.values()
    )
