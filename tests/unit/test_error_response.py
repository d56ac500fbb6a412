"""The last-resort answer: for every served API version, a response carrying only an error
builds, encodes and decodes, with the error in each of its error codes."""

from __future__ import annotations

import pytest

from shareproxy.kafka.dispatch import SERVED
from shareproxy.protocol.codec import decode_response, encode_response, response_type
from shareproxy.protocol.error_response import error_entity
from tests.support.kio_strategies import served_versions


@pytest.mark.parametrize(("key", "version"), served_versions(SERVED), ids=str)
def test_an_error_response_of_every_served_version_encodes(key, version):
    cls = response_type(key, version)
    body = error_entity(cls, -1, "failed")
    _, decoded = decode_response(encode_response(7, body)[4:], cls)
    assert decoded == body
    code = getattr(decoded, "error_code", None)
    assert code is None or code.value == -1
