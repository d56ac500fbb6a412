"""The size check under kio's native reader: every well-formed request passes it exactly, and
no frame — truncated, mutated, or lying about its lengths — gets past it into an allocation
the frame cannot back. A frame the check lets through decodes or fails with MalformedRequest;
nothing else escapes, and nothing aborts the process."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shareproxy.kafka.dispatch import SERVED
from shareproxy.protocol.bounds import FrameBoundsError, check_request
from shareproxy.protocol.codec import (
    MalformedRequest,
    UnsupportedRequest,
    decode_request,
    request_type,
)
from tests.support.kio_strategies import frames, served_versions

VERSIONS = served_versions(SERVED)
_FAST = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))


def test_the_20_byte_frame_that_aborted_the_process_is_refused():
    # ShareGroupDescribe v1 whose compact array of group ids claims 0xffffffff - 1 entries
    frame = bytes.fromhex("004d000100000001ffff00ffffffff0f")
    with pytest.raises(MalformedRequest, match="claims 4294967294 entries"):
        decode_request(frame, SERVED)


def test_a_null_where_the_schema_forbids_one_is_malformed():
    # DeleteGroups v2 with a null GroupsNames (compact length 0)
    frame = bytes.fromhex("002a000200000001000178000000")
    with pytest.raises(MalformedRequest, match="groups_names is null"):
        decode_request(frame, SERVED)


def _decodes_or_refuses(frame: bytes) -> None:
    with contextlib.suppress(MalformedRequest, UnsupportedRequest):
        decode_request(frame, SERVED)


@pytest.mark.parametrize(("key", "version"), VERSIONS, ids=lambda v: str(v))
@_FAST
@given(data=st.data())
def test_well_formed_requests_pass_exactly_and_mutants_are_refused(key, version, data):
    frame = data.draw(frames(key, version))
    assert check_request(frame, 0, request_type(key, version)) == len(frame)
    request = decode_request(frame, SERVED)
    assert (request.api_key, request.api_version) == (key, version)

    mutant = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["byte", "ff", "truncate", "insert"]))
        at = data.draw(st.integers(8, max(8, len(mutant))))  # keep the api key and version
        if kind == "byte" and at < len(mutant):
            mutant[at] = data.draw(st.integers(0, 255))
        elif kind == "ff":  # a length that claims everything
            mutant[at:at] = b"\xff\xff\xff\xff\x0f"
        elif kind == "truncate":
            del mutant[at:]
        else:
            mutant[at:at] = data.draw(st.binary(min_size=1, max_size=8))
    _decodes_or_refuses(bytes(mutant))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_decodes_or_is_refused(frame):
    _decodes_or_refuses(frame)


def test_truncation_at_every_byte_is_refused():
    frame = bytes.fromhex("004d00010000000100010000020673686172650000")  # a real describe
    decode_request(frame, SERVED)
    for end in range(len(frame) - 1):
        with pytest.raises(MalformedRequest):
            decode_request(frame[:end], SERVED)


def test_lengths_are_checked_not_trusted():
    with pytest.raises(FrameBoundsError):
        check_request(b"\x00\x4d\x00\x01\x00\x00\x00\x01\xff\xff\x00\x05ab", 0, request_type(77, 1))


def test_every_advertised_version_has_request_and_response_schemas():
    from shareproxy.protocol.codec import response_type

    for key, (low, high) in SERVED.items():
        for version in range(low, high + 1):
            assert request_type(key, version) and response_type(key, version), (key, version)
