"""Record batches handed out together, as the views of the fetched bytes they are.

Batches that lie side by side in one upstream fetch are one view; batches from several fetches
stay apart rather than being joined into a new buffer (a copy of up to a whole answer, and a
fresh allocation the kernel must fault in), since a response is written as a list of buffers
anyway. ``len`` is their bytes, as for ``bytes``; ``bytes()`` joins them where a reader needs
one buffer."""

from __future__ import annotations

from collections.abc import Iterator


class RecordViews:
    __slots__ = ("_size", "views")

    def __init__(self, views: list[memoryview]) -> None:
        self.views = views
        self._size = sum(len(v) for v in views)

    def __len__(self) -> int:
        return self._size

    def __bytes__(self) -> bytes:
        return b"".join(self.views)

    def __iter__(self) -> Iterator[memoryview]:
        return iter(self.views)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RecordViews):
            other = bytes(other)
        return isinstance(other, bytes | memoryview | bytearray) and bytes(self) == other

    __hash__ = None  # type: ignore[assignment]  # equal to bytes, so not hashable as they are

    def __repr__(self) -> str:
        return f"RecordViews({len(self.views)} views, {self._size} bytes)"


Records = bytes | memoryview | RecordViews  # the batches of one share-partition's answer
