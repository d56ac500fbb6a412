"""The originals a redrive or a dead-letter copy is made from, read back from the log: every
record the log holds is found, also from a broker that answers a read that does not wait before
its read of the log is done (Tansu under load)."""

from __future__ import annotations

from shareproxy.runtime.archive.record_copies import read_originals
from tests.support.middle import MiddleRuntime, on_middle_runtime


@on_middle_runtime
async def test_every_original_the_log_holds_is_read_back(runtime: MiddleRuntime):
    t = runtime.topic()
    runtime.produce(t, [(b"k%d" % i, b"v%d" % i) for i in range(10)])
    await runtime.partition(t)
    runtime.cluster.slow_reads = 1  # the first read comes back without records
    found = await read_originals(runtime.upstream, t, 0, 2, 8, isolation_level=0)
    assert sorted(found) == list(range(2, 9))
    assert (found[8].key, found[8].value) == (b"k8", b"v8")
    assert runtime.cluster.slow_reads == 0


@on_middle_runtime
async def test_offsets_retention_removed_are_absent_and_the_rest_are_read(runtime: MiddleRuntime):
    t = runtime.topic()
    runtime.produce(t, 5)
    runtime.produce(t, 5)
    await runtime.partition(t)
    runtime.cluster.delete_records(t, 0, before=5)
    assert sorted(await read_originals(runtime.upstream, t, 0, 3, 6, isolation_level=0)) == [5, 6]
