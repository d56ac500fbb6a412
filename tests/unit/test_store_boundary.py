"""A store's driver failures reach the runtime as the core's one ``StoreUnavailable``."""

import pytest

from shareproxy.core.store import StoreUnavailable
from shareproxy.persistence.boundary import store_boundary


async def test_a_store_raises_only_store_unavailable_from_its_public_methods():
    @store_boundary
    class Store:
        async def read(self) -> int:
            raise ConnectionRefusedError("[Errno 111] connection refused")

        async def broken(self) -> int:
            raise ValueError("a defect, not an outage")

        async def _inner(self) -> int:
            raise OSError("not converted: not public")

    store = Store()
    with pytest.raises(StoreUnavailable, match="connection refused") as raised:
        await store.read()
    assert isinstance(raised.value.__cause__, ConnectionRefusedError)
    with pytest.raises(ValueError):
        await store.broken()
    with pytest.raises(OSError):
        await store._inner()
