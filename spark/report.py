"""Report what operators ask about share groups: lag per group and partition, redelivery and
archive rates, and the poison list — archived records that reached the delivery limit, with
topic, partition, offset, key, headers and delivery count, read from the source topic.

    shareproxy report [--group G ...] [--output report.json | report.parquet]
    spark-submit --master spark://host:7077 spark/report.py --state-url … --bootstrap-servers …

Lag is the records from SPSO to the high watermark not yet acknowledged or archived. The
redelivery rate is the share of in-flight records delivered more than once; the archive rate is
archived records per hour over ``--window``, from the store's archive log.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from shareproxy.batch.runtime import (
    EXIT_CLEAN,
    duration,
    parser,
    release,
    settings,
    spark_session,
    step,
    table,
    write_output,
)
from shareproxy.batch.sources import store_call
from shareproxy.core.group_config import DELIVERY_COUNT_LIMIT
from shareproxy.core.lag import partition_lag
from shareproxy.core.states import RecordState
from shareproxy.settings import loader


def lag_rows(state_rows: list, hwm: dict[tuple[str, int], tuple[str, int]]) -> list[dict]:
    out = []
    for r in state_rows:
        topic, high = hwm.get((r.topic_id, r.partition), (r.topic_name, None))
        batches = [(b[0], b[1], RecordState(b[2]), b[3]) for b in r.batches]
        speo = batches[-1][1] + 1 if batches else r.start_offset
        delivered = sum(b[1] - b[0] + 1 for b in batches if b[3] >= 1)
        redelivered = sum(b[1] - b[0] + 1 for b in batches if b[3] >= 2)
        lag = None
        if high is not None:
            lag = partition_lag(r.start_offset, speo, [b[:3] for b in batches], high).lag
        out.append(
            {
                "group_id": r.group_id,
                "topic": topic,
                "partition": r.partition,
                "spso": r.start_offset,
                "speo": speo,
                "high_watermark": high,
                "lag": lag,
                "in_flight_delivered": delivered,
                "redelivered": redelivered,
            }
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser("shareproxy report", __doc__.split("\n\n")[0])
    ap.add_argument("--group", action="append", help="only these groups (repeatable)")
    ap.add_argument(
        "--window", type=duration, default=timedelta(hours=24), help="archive-rate window"
    )
    args = ap.parse_args(argv)
    state_url, options = settings(args)
    spark = spark_session("shareproxy-report", args.master)
    try:
        default_limit = loader.load().delivery_count_limit  # the proxy-wide default, as serve's
        with step("reading groups and their delivery limits"):
            limits = {
                m.group_id: int(m.configs.get(DELIVERY_COUNT_LIMIT, default_limit))
                for m in store_call(state_url, "memberships")
                if not args.group or m.group_id in args.group
            }
        read = spark.read
        with step("reading share-partition state and source offsets"):
            state = read.format("shareproxy_state").option("state_url", state_url).load()
            state = state.where(state.group_id.isin(list(limits)))
            offsets = read.format("shareproxy_offsets").options(**options).load()
            hwm = {
                (r.topic_id, r.partition): (r.topic, r.high_watermark) for r in offsets.collect()
            }
            names = {topic_id: topic for (topic_id, _), (topic, _) in hwm.items()}
            partitions = lag_rows(state.collect(), hwm)
        with step("reading the archive log"):
            archived = (
                read.format("shareproxy_state")
                .option("state_url", state_url)
                .option("kind", "archived")
                .load()
            )
            archived = archived.where(archived.group_id.isin(list(limits))).collect()
        since = datetime.now(UTC) - args.window
        groups = []
        for g, limit in sorted(limits.items()):
            mine = [p for p in partitions if p["group_id"] == g]
            logged = [a for a in archived if a.group_id == g]
            delivered = sum(p["in_flight_delivered"] for p in mine)
            recent = sum(
                a.last_offset - a.first_offset + 1
                for a in logged
                if a.archived_at.replace(tzinfo=UTC) >= since
            )
            groups.append(
                {
                    "group_id": g,
                    "delivery_count_limit": limit,
                    "lag": sum(p["lag"] or 0 for p in mine),
                    "redelivery_rate": (
                        sum(p["redelivered"] for p in mine) / delivered if delivered else 0.0
                    ),
                    "archived_records": sum(a.last_offset - a.first_offset + 1 for a in logged),
                    "archived_per_hour": recent / (args.window.total_seconds() / 3600),
                    "poison_records": sum(
                        a.last_offset - a.first_offset + 1
                        for a in logged
                        if a.delivery_count >= limit
                    ),
                }
            )
        poison_ranges = [
            a for a in archived if a.delivery_count >= limits[a.group_id] and a.topic_id in names
        ]
        poison: list[dict] = []
        frames = {}
        if poison_ranges:
            with step(f"reading {len(poison_ranges)} poison ranges from the source topics"):
                tags = {f"{i}": (a.group_id, a.delivery_count) for i, a in enumerate(poison_ranges)}
                ranges = [
                    [str(i), names[a.topic_id], a.partition, a.first_offset, a.last_offset]
                    for i, a in enumerate(poison_ranges)
                ]
                records = (
                    read.format("shareproxy_records")
                    .options(**options)
                    .option("ranges", json.dumps(ranges))
                    .load()
                )
                frames["poison"] = records
                for r in records.orderBy("topic", "partition", "offset").collect():
                    group_id, count = tags[r.tag]
                    poison.append(
                        {
                            "group_id": group_id,
                            "topic": r.topic,
                            "partition": r.partition,
                            "offset": r.offset,
                            "delivery_count": count,
                            "key": r.key,
                            "headers": {h.key: h.value for h in r.headers or []},
                            "timestamp": r.timestamp,
                        }
                    )
        table(
            "share groups",
            ["group", "lag", "redelivery rate", "archived", "archived/h", "poison", "limit"],
            [
                [
                    g["group_id"],
                    g["lag"],
                    f"{g['redelivery_rate']:.1%}",
                    g["archived_records"],
                    f"{g['archived_per_hour']:.1f}",
                    g["poison_records"],
                    g["delivery_count_limit"],
                ]
                for g in groups
            ],
        )
        table(
            "lag per share-partition",
            ["group", "topic", "partition", "SPSO", "SPEO", "HWM", "lag", "redelivered"],
            [
                [
                    p["group_id"],
                    p["topic"],
                    p["partition"],
                    p["spso"],
                    p["speo"],
                    p["high_watermark"],
                    p["lag"],
                    p["redelivered"],
                ]
                for p in partitions
            ],
        )
        table(
            "poison records",
            ["group", "topic", "partition", "offset", "deliveries", "key", "headers"],
            [
                [
                    p["group_id"],
                    p["topic"],
                    p["partition"],
                    p["offset"],
                    p["delivery_count"],
                    p["key"],
                    p["headers"],
                ]
                for p in poison
            ],
        )
        frames["groups"] = spark.createDataFrame(groups) if groups else None
        frames = {k: v for k, v in frames.items() if v is not None}
        document = {
            "generated_at": datetime.now(UTC).isoformat(),
            "groups": groups,
            "partitions": partitions,
            "poison": poison,
        }
        write_output(args.output, document, frames)
        return EXIT_CLEAN
    finally:
        release(spark)


if __name__ == "__main__":
    sys.exit(main())
