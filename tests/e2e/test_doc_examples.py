"""The documentation's CLI examples print what the pages show. Each ``$ shareproxy …`` line of
a fenced block whose output follows is run, in the pages' order, against a proxy holding the
data the pages describe (under names of this test's own), and each table it prints must have
the columns the page shows, in its order; where a page shows an error or an exit status, so
must the command. Values that vary (ids, times, offsets) are not compared."""

from __future__ import annotations

import itertools
import re
import shlex
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.admin_api import cli
from tests.support.consumers import accept_all, poll_until, share_consumer, wait_for

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = [DOCS / "groups.md", DOCS / "records.md"]  # in the order a reader meets the examples
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


@dataclass
class Example:
    argv: list[str]  # after `$ `, the redirection left out
    output: list[str]
    redirect: str | None = None  # the file `> FILE` writes

    @property
    def words(self) -> tuple[str, str]:
        return (self.argv[1], self.argv[2])


def headers(lines: list[str]) -> list[list[str]]:
    """The header row of each table rich drew: the ┃ line after each ┏ line."""
    found = []
    for top, row in itertools.pairwise(lines):
        if top.startswith("┏") and row.startswith("┃"):
            found.append([cell.strip() for cell in row.strip("┃").split("┃")])
    return found


def examples(text: str) -> list[Example]:
    """Every `$ shareproxy …` line of a fenced block, with the lines up to the next `$ `."""
    found: list[Example] = []
    for block in FENCE.findall(text):
        current: Example | None = None
        for line in block.splitlines():
            if not line.startswith("$ "):
                if current is not None:
                    current.output.append(line)
                continue
            argv = shlex.split(line[2:])
            current = None
            if argv[0] == "shareproxy":
                redirect = None
                if ">" in argv:
                    redirect, argv = argv[argv.index(">") + 1], argv[: argv.index(">")]
                current = Example(argv, [], redirect)
                found.append(current)
    return found


def exit_statuses(text: str) -> dict[int, int]:
    """For the n-th example, the status a `$ echo $?` right after it shows."""
    statuses: dict[int, int] = {}
    n = -1
    for block in FENCE.findall(text):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("$ shareproxy"):
                n += 1
            elif line == "$ echo $?" and i + 1 < len(lines) and n >= 0:
                statuses[n] = int(lines[i + 1])
    return statuses


@dataclass
class Scenario:
    """The pages' data under this test's names, each part set up just before the first
    example that shows it, so a command listing every group sees the pages' groups only."""

    proxy: Any
    topic: Callable[..., str]
    produce: Callable[..., None]
    tmp: Path
    names: dict[str, str] = field(default_factory=dict)
    open: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        own = uuid.uuid4().hex[:6]
        for group in ("audit", "workers", "orders-workers", "billing"):
            self.names[group] = f"{group}-{own}"
        self.names["old-a"] = self.names["audit"]  # deleted once their own examples ran
        self.names["old-b"] = self.names["orders-workers"]
        self.names["old-c"] = f"old-c-{own}"  # never made
        self.names["plan.csv"] = str(self.tmp / "plan.csv")
        self.http = httpx.Client(base_url=self.proxy.admin_url, timeout=30)

    def members(self, group: str) -> list[str]:
        answer = self.http.get(f"/v1/share-groups/{group}")
        return [m["member_id"] for m in answer.json().get("members", [])]

    def empty(self, group: str) -> None:
        wait_for(lambda: self.members(group) == [], what=f"{group} to be empty")

    def glance(self) -> None:
        """`audit` has read everything and left; `workers`' two members hold records."""
        orders = self.topic(3)
        self.produce(orders, 300)
        audit = share_consumer(self.proxy, self.names["audit"])
        audit.subscribe([orders])
        accept_all(audit, 300)
        audit.close()
        self.empty(self.names["audit"])
        first, second = (
            share_consumer(self.proxy, self.names["workers"], "explicit") for _ in range(2)
        )
        self.open += [first, second]
        for c in (first, second):
            c.subscribe([orders])
        assert poll_until(first, 1, 30)

        def joined() -> bool:
            second.poll(0.5)  # a share consumer joins on its polls
            return len(self.members(self.names["workers"])) == 2

        wait_for(joined, what="workers' second member")

    def resets(self) -> None:
        """`orders-workers` read 20 records of each of two partitions and left."""
        self.close()
        orders = self.topic(2)
        self.produce(orders, 40, partitions=2)
        c = share_consumer(self.proxy, self.names["orders-workers"])
        c.subscribe([orders])
        accept_all(c, 40)
        c.close()
        self.empty(self.names["orders-workers"])

    def records(self) -> None:
        """`billing`'s one member holds ten records of one partition."""
        t = self.topic(1)
        self.produce(t, 10, partitions=1)
        self.names["t-915f085b0d"] = self.names["orders"] = t
        c = share_consumer(self.proxy, self.names["billing"], "explicit")
        self.open.append(c)
        c.subscribe([t])
        assert len(poll_until(c, 10, 30)) == 10
        [self.names["da95A9I2QK2mjdRyo/U5Qg"]] = self.members(self.names["billing"])

    def archive(self) -> None:
        """Offsets 2 and 8 archived too, as the archive page shows them."""
        base = f"/v1/share-groups/{self.names['billing']}/partitions/{self.names['orders']}/0"
        for offset in (2, 8):
            answer = self.http.post(f"{base}/records/reject", json={"first_offset": offset})
            assert answer.status_code == 200, answer.text

    def close(self) -> None:
        for c in self.open:
            c.close()
        self.open.clear()

    def mapped(self, argv: list[str]) -> list[str]:
        def one(word: str) -> str:
            name, colon, rest = word.partition(":")
            return self.names[name] + colon + rest if name in self.names else word

        return [one(w) for w in argv]


@pytest.mark.long
def test_each_documented_example_prints_the_tables_it_shows(proxy, topic, produce, tmp_path):
    text = "\n".join(page.read_text() for page in PAGES)
    shown = examples(text)
    statuses = exit_statuses(text)
    assert len(shown) >= 10, [ex.argv for ex in shown]
    s = Scenario(proxy(record_lock_duration_ms=60000), topic, produce, tmp_path)
    before = {
        ("groups", "list"): s.glance,
        ("groups", "reset-offsets"): s.resets,
        ("groups", "records"): s.records,
        ("groups", "archived"): s.archive,
    }
    after = {("groups", "release-member"): s.close}  # it would fetch the released records
    try:
        for n, ex in enumerate(shown):
            assert ex.words[0] == "groups", f"no scenario runs `{shlex.join(ex.argv)}`"
            if ex.words in before:
                before.pop(ex.words)()
            ran = cli(s.proxy, *s.mapped(ex.argv[2:]))
            where = f"`{shlex.join(ex.argv)}` printed:\n{ran.stdout}{ran.stderr}"
            assert headers(ran.stdout.splitlines()) == headers(ex.output), where
            if ex.redirect is not None:
                Path(s.mapped([ex.redirect])[0]).write_text(ran.stdout)
            shows_error = any(line.startswith("error:") for line in ex.output)
            assert ("error:" in ran.stderr) == shows_error, where
            assert (ran.returncode != 0) == shows_error, where
            if n in statuses:
                assert ran.returncode == statuses[n], where
            if ex.words in after:
                after.pop(ex.words)()
        assert not before, f"the pages no longer show {sorted(before)}"
    finally:
        s.close()
        s.http.close()


def test_the_examples_are_read_as_the_pages_write_them():
    """The reading itself: commands, their output, a redirection and an exit status."""
    text = "\n".join(
        [
            "```console",
            "$ shareproxy groups delete a b > out.txt",
            "error: no",
            "┏━━━┳━━━┓",
            "┃ A ┃ B C ┃",
            "┡━━━╇━━━┩",
            "$ echo $?",
            "1",
            "$ cat out.txt",
            "x",
            "```",
        ]
    )
    [ex] = examples(text)
    assert ex.argv == ["shareproxy", "groups", "delete", "a", "b"] and ex.redirect == "out.txt"
    assert headers(ex.output) == [["A", "B C"]]
    assert exit_statuses(text) == {0: 1}
