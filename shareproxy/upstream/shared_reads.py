"""Metadata lookups that arrive together share one request to the cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable


class SharedReads:
    """Each caller is answered by a request sent after it asked that named its topics (or all
    topics), so what it reads is as fresh as a request of its own. Callers that ask while a
    request is out share the next one: a thousand members joining at once cost the cluster two
    Metadata requests, not a thousand in a row, and none of them waits behind the others'."""

    def __init__(self, read: Callable[[list[str] | None], Awaitable[object]]) -> None:
        self._read = read  # one Metadata request: the names, or None for every topic
        self._turn = asyncio.Lock()
        self._asks = 0  # every ask is numbered
        self._names: set[str] = set()  # asked for since the last request took them
        self._everything = False  # whether an ask since then wants every topic
        self._answered = 0  # asks up to this number have their answer
        self._failed: tuple[int, Exception] | None = None  # asks up to it got this error

    async def read(self, topics: Iterable[str] | None) -> None:
        if topics is None:
            self._everything = True
        else:
            self._names.update(topics)
        self._asks += 1
        ask = self._asks
        async with self._turn:
            if self._answered >= ask:
                return
            if self._failed is not None and self._failed[0] >= ask:
                raise self._failed[1].with_traceback(None)
            upto, everything, names = self._asks, self._everything, self._names
            self._everything, self._names = False, set()
            try:
                await self._read(None if everything else sorted(names))
            except Exception as exc:
                self._failed = (upto, exc)
                raise
            except BaseException:  # cancelled: whoever is next in line asks for these again
                self._everything |= everything
                self._names |= names
                raise
            self._answered = upto
