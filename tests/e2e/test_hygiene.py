"""Test hygiene: what a fixture starts is stopped, also when starting it fails."""

from __future__ import annotations

import pytest

from shareproxy.host.processes import free_port
from tests.support import leaks
from tests.support.proxy import ProxyProcess


def test_a_proxy_that_does_not_come_up_is_not_left_running(tmp_path):
    unreachable = f"127.0.0.1:{free_port()}"  # nothing listens: the proxy retries forever
    p = ProxyProcess(unreachable, f"sqlite:///{tmp_path}/state.db")
    before = leaks.running_helpers()
    with pytest.raises(RuntimeError, match="did not listen"):
        p.start(timeout=3)
    assert p.proc is None
    assert leaks.running_helpers() == before
