"""SCRAM users made over the REST API for the ACL tests."""

from __future__ import annotations

import time
import uuid

from tests.support.kafka_client import KafkaConnection
from tests.support.secure import Secure


def new_user(secure: Secure) -> tuple[str, KafkaConnection]:
    user = f"fwd{uuid.uuid4().hex[:6]}"
    with secure.http() as admin:
        assert admin.post("/v1/users", json={"name": user, "password": "fwd-pw"}).status_code == 201
    deadline = time.monotonic() + 10
    while True:  # the proxy reloads users every couple of seconds
        k = KafkaConnection(secure.sasl)
        if k.plain(user, "fwd-pw").error_code == 0:
            return f"User:{user}", k
        k.close()
        assert time.monotonic() < deadline, "the new user never became usable"
        time.sleep(0.5)
