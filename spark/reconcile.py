"""Reconcile stored share-group state against the source topics.

Reads every share-partition's state (store, in executors) and every source partition's offsets
(cluster, in executors), joins them per group with the membership the proxy recorded, and
classifies each share-partition (healthy, records lost below the log start, beyond the high
watermark, recreated or deleted topic, deleted or new partition, expired group, unsubscribed
topic). Dry run by default; ``--apply`` repairs through the store's fenced write path.

    shareproxy reconcile [--apply] [--retention 7d] [--output findings.json]
    spark-submit --master spark://host:7077 spark/reconcile.py --state-url … --bootstrap-servers …

Exit code: 0 no drift, 1 drift found (repaired or not: rerun to confirm), 2 bad arguments.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from shareproxy.batch import repair
from shareproxy.batch.runtime import (
    EXIT_CLEAN,
    EXIT_DRIFT,
    duration,
    jsonable,
    parser,
    proxy_retention,
    release,
    settings,
    spark_session,
    stderr,
    step,
    table,
    write_output,
)
from shareproxy.batch.sources import store_call
from shareproxy.core.drift import (
    Cluster,
    Drift,
    Finding,
    SourcePartition,
    StoredFacts,
    classify_group,
)
from shareproxy.core.expiry import facts_of
from shareproxy.core.states import RecordState

FINDINGS_SCHEMA = (
    "drift string, group_id string, topic string, topic_id string, partition int, "
    "state_epoch int, spso long, log_start long, high_watermark long, records long, "
    "detail string, repair string, outcome string"
)
COLUMNS = [c.split()[0] for c in FINDINGS_SCHEMA.split(", ")]


def _stored(r: Any) -> StoredFacts:
    """A state data-source row as the drift rules take it."""
    return StoredFacts(
        r.group_id,
        UUID(r.topic_id),
        r.topic_name,
        r.partition,
        r.state_epoch,
        r.start_offset,
        tuple((b[0], b[1], RecordState(b[2]), b[3]) for b in r.batches),
    )


def find(
    spark: object,
    state_url: str,
    options: dict[str, str],
    retention_ms: int | None,
    now_ms: int,
) -> list[Finding]:
    """The job's Spark part: read, join per group, classify in executors."""
    with step("reading group membership from the store"):
        groups = {m.group_id: facts_of(m) for m in store_call(state_url, "memberships")}
    reader = spark.read  # type: ignore[attr-defined]
    with step("reading source partition offsets (log start, high watermark, LSO, topic id)"):
        offsets = reader.format("shareproxy_offsets").options(**options).load()
        source = [
            SourcePartition(
                r.topic, UUID(r.topic_id), r.partition, r.log_start, r.high_watermark, r.last_stable
            )
            for r in offsets.collect()
        ]
    sc = spark.sparkContext  # type: ignore[attr-defined]
    cluster = sc.broadcast(source)
    facts = sc.broadcast(groups)

    def judge(item: tuple[str, tuple[object, Iterable[object] | None]]) -> list[Finding]:
        group_id, (_, rows) = item
        stored = [_stored(r) for r in rows or ()]
        return classify_group(
            facts.value[group_id], stored, Cluster(cluster.value), now_ms, retention_ms
        )

    with step(f"classifying the share-partitions of {len(groups)} groups"):
        state = (
            reader.format("shareproxy_state")
            .option("state_url", state_url)
            .option("parallelism", options["parallelism"])
            .load()
        )
        by_group = state.rdd.keyBy(lambda r: r.group_id).groupByKey()
        every_group = sc.parallelize([(g, None) for g in groups])
        findings = every_group.leftOuterJoin(by_group).flatMap(judge).collect()
    return sorted(findings, key=lambda f: (f.group_id, f.topic or "", f.partition or -1))


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser("shareproxy reconcile", __doc__.split("\n\n")[0])
    ap.add_argument(
        "--retention",
        type=duration,
        default=None,
        help="how long an empty group, or a topic a live group dropped, keeps its state "
        "(offsets.retention.minutes semantics; default: the proxy's share_group_retention_ms, "
        "and when that is unset nothing expires, as Kafka keeps share groups until deleted)",
    )
    ap.add_argument("--apply", action="store_true", help="repair what was found (default: dry run)")
    args = ap.parse_args(argv)
    state_url, options = settings(args)
    retention = args.retention if args.retention is not None else proxy_retention()
    retention_ms = None if retention is None else int(retention.total_seconds() * 1000)
    spark = spark_session("shareproxy-reconcile", args.master)
    try:
        now = repair.now_ms()
        findings = find(spark, state_url, options, retention_ms, now)
        drift = [f for f in findings if f.drift != Drift.HEALTHY]
        outcomes: list[repair.Outcome] = []
        if args.apply and drift:
            with step(f"repairing {len(drift)} findings through the store"):
                outcomes = asyncio.run(repair.apply(state_url, drift, retention_ms))
        done = {(o.finding.group_id, o.finding.topic_id, o.finding.partition): o for o in outcomes}
        rows = []
        for f in findings:
            o = done.get((f.group_id, f.topic_id, f.partition))
            status = "" if f.drift == Drift.HEALTHY else "dry run"
            if o is not None:
                status = ("repaired: " if o.applied else "") + o.detail
            rows.append({**dataclasses.asdict(f), "repair": f.repair.value, "outcome": status})
        table(
            f"share-partitions: {len(findings) - len(drift)} healthy, {len(drift)} drifted",
            [
                "group",
                "topic",
                "partition",
                "drift",
                "SPSO",
                "log start",
                "HWM",
                "lost",
                "repair",
                "outcome",
            ],
            [
                [
                    r["group_id"],
                    r["topic"],
                    r["partition"],
                    r["drift"],
                    r["spso"],
                    r["log_start"],
                    r["high_watermark"],
                    r["records"],
                    r["repair"],
                    r["outcome"],
                ]
                for r in rows
            ],
        )
        summary: dict[str, int] = {}
        for f in findings:
            summary[f.drift.value] = summary.get(f.drift.value, 0) + 1
        document = {"applied": args.apply, "summary": summary, "findings": rows}
        frames = {}
        if args.output is not None and args.output.suffix == ".parquet":
            frames["findings"] = spark.createDataFrame(
                [tuple(jsonable(r[c]) for c in COLUMNS) for r in rows], FINDINGS_SCHEMA
            )
        write_output(args.output, document, frames)
        if drift:
            stderr.print(f"[yellow]drift found in {len(drift)} share-partitions[/yellow]")
        return EXIT_DRIFT if drift else EXIT_CLEAN
    finally:
        release(spark)


if __name__ == "__main__":
    sys.exit(main())
