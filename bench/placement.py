"""How evenly placement spreads partitions over the nodes, and how many move when a node joins
or leaves, against the fewest that must (those the joining node takes, or those the leaving
node held); the rule before the catalogue (rendezvous hashing per partition) in the same run.
Pure computation: the figures depend on the topics' shapes, not on the machine.

    python -m bench.placement [--topics 40] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from uuid import UUID

from rich.console import Console
from rich.table import Table

from shareproxy.core.placement import Catalogue, Placement

SHAPES = {
    "the fleet demo (6 partitions)": [6],
    "2-partition topics": [2],
    "mixed (1 to 50 partitions)": [1, 2, 3, 5, 6, 12, 24, 50],
}
CHANGES = [((1, 2), (1, 2, 3)), ((1, 2, 3), (1, 2, 3, 4)), ((1, 2, 3, 4), (1, 2, 4))]
CHANGES += [(tuple(range(1, 8)), tuple(range(1, 9)))]


def leaders(
    nodes: tuple[int, ...], catalogue: Catalogue, even: bool
) -> dict[tuple[UUID, int], int]:
    placement = Placement(nodes, catalogue=catalogue if even else ())
    return {(t, p): placement.partition_leader(t, p) for t, n in catalogue for p in range(n)}


def spread(
    found: dict[tuple[UUID, int], int], nodes: tuple[int, ...], catalogue: Catalogue
) -> tuple[int, int]:
    """The widest gap between two nodes' counts: of one topic (the worst topic), and of totals."""
    worst = 0
    for t, n in catalogue:
        per = Counter(found[(t, p)] for p in range(n))
        worst = max(worst, max(per[x] for x in nodes) - min(per[x] for x in nodes))
    totals = Counter(found.values())
    return worst, max(totals[x] for x in nodes) - min(totals[x] for x in nodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    draw = random.Random(args.seed)
    table = Table(title=f"placement of {args.topics} topics (seed {args.seed})")
    for column in ("topics", "nodes", "rule", "widest gap: topic / total", "moved", "fewest"):
        table.add_column(column, justify="right" if column in ("moved", "fewest") else "left")
    for label, sizes in SHAPES.items():
        catalogue = [
            (UUID(int=draw.getrandbits(128)), draw.choice(sizes)) for _ in range(args.topics)
        ]
        for before, after in CHANGES:
            for even in (False, True):
                a, b = leaders(before, catalogue, even), leaders(after, catalogue, even)
                topic_gap, total_gap = spread(b, after, catalogue)
                joined, left = set(after) - set(before), set(before) - set(after)
                fewest = sum(1 for k in a if b[k] in joined or a[k] in left)
                moved = sum(1 for k in a if a[k] != b[k])
                table.add_row(
                    label,
                    f"{len(before)} → {len(after)}",
                    "even" if even else "rendezvous",
                    f"{topic_gap} / {total_gap}",
                    str(moved),
                    str(fewest),
                )
    Console().print(table)


if __name__ == "__main__":
    main()
