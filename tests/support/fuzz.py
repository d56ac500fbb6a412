"""A frame fuzzer for a live Kafka listener: requests of every served API and version generated
from the kio schemas (hypothesis), sent as they are, mutated, or replaced by garbage, over
several connections at once; and bodies for the HTTP records API, valid or mutated, sent while
their groups are deleted. It only needs the listener to answer or close; the test decides
what counts as a failure (the process gone, an unhandled exception in its log, a consumer
that stopped receiving)."""

from __future__ import annotations

import asyncio
import random
import struct
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
from hypothesis import HealthCheck, Phase, given, settings

from tests.support.kio_strategies import frames, served_versions

_ANSWER_WAIT_S = 0.5  # a held ShareFetch or Fetch answers later: drop the connection instead


def frame_pool(served: dict[int, tuple[int, int]], per_version: int = 8) -> list[bytes]:
    """Well-formed request frames (no size prefix) of every served API version; the same
    frames every run (derandomized), so a finding can be replayed."""
    pool: list[bytes] = []
    for key, version in served_versions(served):

        @settings(
            max_examples=per_version,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(frames(key, version))
        def collect(frame: bytes) -> None:
            pool.append(frame)

        collect()
    return pool


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """One to four edits that keep the api key and version, so the mutant reaches that API's
    decoder and handler: a byte changed, a length that claims everything, a cut, an insertion,
    a 32-bit field set to an extreme."""
    out = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(4, max(4, len(out)))
        kind = rng.randrange(5)
        if kind == 0 and at < len(out):
            out[at] = rng.randrange(256)
        elif kind == 1:
            out[at:at] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\xff\xff"])
        elif kind == 2:
            del out[at:]
        elif kind == 3:
            out[at:at] = rng.randbytes(rng.randint(1, 16))
        elif at + 4 <= len(out):
            out[at : at + 4] = rng.choice([b"\x80\x00\x00\x00", b"\x7f\xff\xff\xff", b"\xff" * 4])
    return bytes(out)


def garbage(rng: random.Random, served: list[tuple[int, int]]) -> bytes:
    """Random bytes, or a plausible header (a served api key, any version) over random bytes."""
    if rng.random() < 0.5:
        return rng.randbytes(rng.randint(0, 64))
    key, version = rng.choice(served)
    version = rng.choice([version, rng.randint(-1, 20)])
    return struct.pack(">hhi", key, version, rng.randrange(2**31)) + rng.randbytes(
        rng.randint(0, 48)
    )


@dataclass
class FuzzStats:
    cases: int = 0
    answered: int = 0
    closed: int = 0
    held: int = 0
    seconds: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)
    per_second: list[int] = field(default_factory=list)  # cases in each second of the run
    answered_by_api: dict[int, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.cases / self.seconds if self.seconds else 0.0

    def rates(self, seconds: int) -> tuple[float, float]:
        """Cases per second in the first and in the last ``seconds`` whole seconds: a listener
        stalled behind a sick upstream shows as a last rate far below the first."""
        whole = self.per_second[:-1] or self.per_second
        n = max(1, min(seconds, len(whole) // 2))
        return sum(whole[:n]) / n, sum(whole[-n:]) / n


class FrameFuzzer:
    def __init__(self, port: int, pool: list[bytes], seed: int = 0) -> None:
        self.port = port
        self.pool = pool
        self.rng = random.Random(seed)
        self.versions = sorted({struct.unpack_from(">hh", f) for f in pool})
        self.stats = FuzzStats()
        self._started = time.monotonic()

    def case(self) -> tuple[str, bytes]:
        r = self.rng.random()
        if r < 0.15:
            return "garbage", garbage(self.rng, self.versions)
        frame = self.rng.choice(self.pool)
        if r < 0.35:
            return "valid", frame
        return "mutated", mutate(frame, self.rng)

    async def run(self, seconds: float, connections: int = 8) -> FuzzStats:
        started = time.monotonic()
        deadline = started + seconds
        self._started = started
        await asyncio.gather(*(self._worker(deadline) for _ in range(connections)))
        self.stats.seconds = time.monotonic() - started
        return self.stats

    async def _worker(self, deadline: float) -> None:
        writer: asyncio.StreamWriter | None = None
        reader: asyncio.StreamReader | None = None
        try:
            while time.monotonic() < deadline:
                if writer is None:
                    reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                assert reader is not None
                kind, frame = self.case()
                self.stats.cases += 1
                second = int(time.monotonic() - self._started)
                timeline = self.stats.per_second
                timeline.extend([0] * (second + 1 - len(timeline)))
                timeline[second] += 1
                self.stats.kinds[kind] = self.stats.kinds.get(kind, 0) + 1
                try:
                    writer.write(struct.pack(">i", len(frame)) + frame)
                    await writer.drain()
                    size = struct.unpack(
                        ">i", await asyncio.wait_for(reader.readexactly(4), _ANSWER_WAIT_S)
                    )[0]
                    await asyncio.wait_for(reader.readexactly(size), _ANSWER_WAIT_S)
                    self.stats.answered += 1
                    if kind != "garbage":
                        key = struct.unpack_from(">h", frame)[0]
                        by_api = self.stats.answered_by_api
                        by_api[key] = by_api.get(key, 0) + 1
                    continue
                except (asyncio.IncompleteReadError, ConnectionError):
                    self.stats.closed += 1
                except TimeoutError:
                    self.stats.held += 1  # no answer yet (a long poll, or acks=0): start over
                writer.close()
                writer = reader = None
        finally:
            if writer is not None:
                writer.close()


# values of every JSON type and the extremes of each: what a careless or hostile HTTP client sends
_ODD_VALUES: list[object] = [
    None,
    "1",
    "",
    "x" * 300,
    1.5,
    1024.0,
    True,
    -1,
    0,
    2**31,
    2**63,
    2**64,
    [],
    {},
    ["t", "Read"],
]


def records_body(rng: random.Random, topic: str) -> tuple[str, dict[str, object]]:
    """A records API call (``fetch`` or ``acknowledge``) for ``topic``, valid, or with one to
    three fields replaced by an odd value, dropped, or joined by an unknown one."""
    if rng.random() < 0.5:
        kind = "fetch"
        body: dict[str, object] = {
            "topics": [topic],
            "consumer_id": rng.choice([None, "http-fuzz"]),
            "max_records": rng.randint(1, 50),
            "max_wait_ms": rng.randint(0, 50),
            "max_bytes": 1024 * rng.randint(1, 64),
        }
        inner: dict[str, object] = body
    else:
        kind = "acknowledge"
        first = rng.randint(0, 100)
        inner = {
            "topic": topic,
            "partition": rng.randint(0, 2),
            "first_offset": first,
            "last_offset": first + rng.randint(0, 10),
            "type": rng.choice(["accept", "release", "reject", "renew"]),
        }
        body = {"consumer_id": "http-fuzz", "acknowledgements": [inner]}
    if rng.random() < 0.2:
        return kind, body
    for _ in range(rng.randint(1, 3)):
        target = rng.choice([body, inner])
        field = rng.choice([*target, "extra"])
        if rng.random() < 0.15:
            target.pop(field, None)
        else:
            target[field] = rng.choice([*_ODD_VALUES, [topic, "Read"]])
    return kind, body


async def fuzz_records(
    admin_url: str, topic: str, seconds: float, seed: int, groups: int = 4
) -> tuple[Counter[int], list[str]]:
    """Records API calls from ``records_body`` to a few groups for ``seconds``, while another
    client deletes those groups and their offsets (a load then races a deletion). Returns the
    count of each HTTP status and what every 5xx answer said."""
    rng = random.Random(seed)
    names = [f"fuzz-http-{seed}-{i}" for i in range(groups)]
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    deadline = time.monotonic() + seconds

    def record(what: str, response: httpx.Response) -> None:
        statuses[response.status_code] += 1
        if response.status_code >= 500:
            failures.append(f"{what}: {response.status_code} {response.text[:300]}")

    async with httpx.AsyncClient(base_url=admin_url, timeout=60) as http:

        async def call() -> None:
            while time.monotonic() < deadline:
                group = rng.choice(names)
                kind, body = records_body(rng, topic)
                try:
                    response = await http.post(
                        f"/v1/share-groups/{group}/records/{kind}", json=body
                    )
                except httpx.TransportError as exc:  # uvicorn drops a connection after a 500
                    failures.append(f"{kind} {body}: no answer ({exc!r})")
                    continue
                record(f"{kind} {body}", response)

        async def delete() -> None:
            while time.monotonic() < deadline:
                group = rng.choice(names)
                path = f"/v1/share-groups/{group}" + rng.choice(["", f"/offsets?topic={topic}"])
                record(f"DELETE {path}", await http.delete(path))
                await asyncio.sleep(0.005)

        await asyncio.gather(*(call() for _ in range(groups)), delete())
    return statuses, failures


_CLIENT = struct.pack(">h", 4) + b"fuzz"
_API_VERSIONS = struct.pack(">hhi", 18, 0, 1) + _CLIENT  # v0


async def api_keys(port: int) -> set[int]:
    """The api keys a listener advertises (ApiVersions v0)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS)
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        body = await reader.readexactly(size)
    finally:
        writer.close()
    (count,) = struct.unpack_from(">i", body, 6)  # after the correlation id and error code
    return {struct.unpack_from(">h", body, 10 + 6 * i)[0] for i in range(count)}


async def broker_answers(port: int, wait_s: float = 2.0) -> bool:
    """Whether a broker answers ApiVersions and then Metadata (all topics) on a fresh
    connection within ``wait_s`` each: a broker wedged by what it was sent does not."""
    probes = (
        _API_VERSIONS,
        struct.pack(">hhi", 3, 1, 2) + _CLIENT + struct.pack(">i", -1),  # Metadata v1, all
    )
    for probe in probes:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port), wait_s
            )
        except (OSError, TimeoutError):
            return False
        try:
            writer.write(struct.pack(">i", len(probe)) + probe)
            await writer.drain()
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), wait_s))[0]
            await asyncio.wait_for(reader.readexactly(size), wait_s)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            return False
        finally:
            writer.close()
    return True
