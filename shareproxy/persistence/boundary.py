"""Where the store's drivers end: every public coroutine of a store class raises the core's
``StoreUnavailable`` instead of SQLAlchemy's, asyncpg's or a socket's errors, so the runtime
names one error however the store failed, and no caller imports a driver."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from shareproxy.core.store import StoreUnavailable
from shareproxy.persistence.engine import STORE_FAILURES
from shareproxy.telemetry.logs import first_line

Store = TypeVar("Store", bound=type)


def converting(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``method``, raising StoreUnavailable (its cause chained) where a driver failed."""

    @functools.wraps(method)
    async def converted(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except STORE_FAILURES as exc:
            raise StoreUnavailable(first_line(exc)) from exc

    return converted


def store_boundary(cls: Store) -> Store:
    """Convert the failures of every public coroutine method of ``cls`` (a class decorator:
    a method added later is covered without anyone remembering to)."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.iscoroutinefunction(member):
            setattr(cls, name, converting(member))
    return cls
