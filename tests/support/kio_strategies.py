"""Hypothesis strategies for kio messages: any request of any served API and version, built
from kio's own schema types (kio gives its primitive types hypothesis hooks; they are
registered here, plus the raw records type, which has none)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from functools import cache
from typing import Any

from hypothesis import strategies as st
from kio.index import KioIndexError
from kio.static import primitive

from shareproxy.protocol.codec import encode_request, request_type


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@cache
def _register() -> None:
    for cls in (*_subclasses(primitive.Interval), *_subclasses(primitive.PhantomStr)):
        cls.__hypothesis_hook__()
    for cls in (primitive.i32Timedelta, primitive.i64Timedelta, primitive.TZAware):
        cls.__hypothesis_hook__()
    st.register_type_strategy(primitive.Records, st.binary(max_size=64).map(primitive.Records))
    # kio's own hook reaches i64 milliseconds its native reader refuses to decode ("timedelta
    # milliseconds overflow", beyond any real timeout or retention); well-formed here means
    # what kio reads back
    st.register_type_strategy(
        primitive.i64Timedelta,
        st.integers(-(2**31), 2**31 - 1).map(
            lambda ms: primitive.i64Timedelta.parse(timedelta(milliseconds=ms))
        ),
    )


def served_versions(served: dict[int, tuple[int, int]]) -> list[tuple[int, int]]:
    """Every (api key, version) in ``served`` that kio has a schema for."""
    out = []
    for key, (low, high) in sorted(served.items()):
        for version in range(low, high + 1):
            try:
                request_type(key, version)
            except KioIndexError:
                continue
            out.append((key, version))
    return out


def requests(key: int, version: int) -> st.SearchStrategy[Any]:
    """Any request body of that API version."""
    _register()
    return st.from_type(request_type(key, version))


def frames(key: int, version: int) -> st.SearchStrategy[bytes]:
    """Encoded request frames (size prefix removed) of that API version."""
    return st.builds(
        lambda body, cid: encode_request(cid, "fuzz", body)[4:],
        requests(key, version),
        st.integers(0, 2**31 - 1),
    )
