"""Kafka's metric names read from the proxy's own families: labels summed away or renamed as
Kafka tags them, values Kafka does not count left out, histogram buckets kept in order."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from shareproxy.telemetry.kafka_metrics import ALIASES, aliases


def samples(families) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def test_acknowledgements_by_kafkas_ack_type_summed_over_groups_without_gaps():
    acks = Counter("share_acknowledgements", "", ["group", "type"], registry=CollectorRegistry())
    acks.labels("g1", "accept").inc(5)
    acks.labels("g2", "accept").inc(2)
    acks.labels("g2", "gap").inc(9)
    acks.labels("g1", "renew").inc(1)
    got = samples(aliases(acks.collect()))
    name = "kafka_server_share_group_metrics_record_acknowledgements_total"
    assert got == {
        (name, (("ack_type", "Accept"),)): 7.0,
        (name, (("ack_type", "Renew"),)): 1.0,
    }


def test_request_rates_keep_only_their_api_and_outcome():
    requests = Counter("shareproxy_requests", "", ["api", "outcome"], registry=CollectorRegistry())
    requests.labels("ShareFetch", "ok").inc(3)
    requests.labels("ShareFetch", "error").inc(1)
    requests.labels("Metadata", "error").inc(4)
    got = samples(aliases(requests.collect()))
    prefix = "kafka_server_broker_topic_metrics_"
    assert got[(prefix + "total_share_fetch_requests_total", ())] == 4
    assert got[(prefix + "failed_share_fetch_requests_total", ())] == 1
    assert (prefix + "total_share_acknowledgement_requests_total", ()) not in got


def test_a_histogram_keeps_its_buckets_in_order_and_drops_created():
    writes = Histogram(
        "shareproxy_store_commit_duration_seconds",
        "",
        buckets=(0.001, 0.01, 0.1),
        registry=CollectorRegistry(),
    )
    writes.observe(0.005)
    writes.observe(0.05)
    (family,) = aliases(writes.collect())
    names = [(s.name, s.labels.get("le")) for s in family.samples]
    base = "kafka_coordinator_share_write_latency_seconds"
    assert names == [
        (base + "_bucket", "0.001"),
        (base + "_bucket", "0.01"),
        (base + "_bucket", "0.1"),
        (base + "_bucket", "+Inf"),
        (base + "_count", None),
        (base + "_sum", None),
    ]
    assert [s.value for s in family.samples][:5] == [0, 1, 2, 2, 2]


def test_every_kafka_name_is_distinct():
    assert len({a.name for a in ALIASES}) == len(ALIASES)
