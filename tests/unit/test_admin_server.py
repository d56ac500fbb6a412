"""The admin API's server ends quietly however the node's start ends: a start cut short (the
node stopped, or failed, before its admin API was stopped in order) leaves no error or
traceback in the log, which operators alert on."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from shareproxy.admin.app import AdminServer
from tests.support.admin_app import Directory, Grants, Places, admin_app


def test_a_server_the_node_never_stopped_ends_with_the_loop_without_an_error(
    caplog: pytest.LogCaptureFixture,
):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))

    async def start_only() -> None:
        await AdminServer(admin_app(Places(), Grants(), Directory()), sock).start()

    with caplog.at_level(logging.INFO):
        asyncio.run(start_only())  # the loop ends with the server still running: cancelled
    sock.close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
