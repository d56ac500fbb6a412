"""A proxy with SASL_PLAINTEXT, SASL_SSL and SSL listeners and ACLs on, for the security
tests of every front end: its users, its admin API, its rules."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
from confluent_kafka import ShareConsumer

from shareproxy.host.processes import free_port
from tests.support.certs import CertificateAuthority
from tests.support.postgres import TemporaryPostgres
from tests.support.proxy import ProxyProcess

PASSWORDS = {"admin": "admin-Secret-1", "alice": "alice-Secret-2", "bob": "bob-Secret-3"}


def add_user(state_url: str, name: str, password: str) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "shareproxy.cli",
            "users",
            "add",
            name,
            "--password-stdin",
            "--state-url",
            state_url,
        ],
        input=password + "\n",
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr


class Secure:
    """A proxy with SASL_PLAINTEXT, SASL_SSL and SSL listeners and ACLs on."""

    def __init__(
        self, proxy: ProxyProcess, sasl_ssl: int, ssl: int, ca: CertificateAuthority
    ) -> None:
        self.proxy = proxy
        self.sasl = proxy.port
        self.sasl_ssl = sasl_ssl
        self.ssl = ssl
        self.ca = ca

    def http(self, user: str | None = "admin", password: str | None = None) -> httpx.Client:
        auth = None if user is None else (user, password or PASSWORDS[user])
        return httpx.Client(base_url=self.proxy.admin_url, auth=auth, timeout=30)

    def acl(
        self,
        principal: str,
        rtype: str,
        name: str,
        *ops: str,
        pattern: str = "LITERAL",
        deny: bool = False,
    ) -> None:
        with self.http() as h:
            r = h.post(
                "/v1/acls",
                json=[
                    {
                        "principal": principal,
                        "resource_type": rtype,
                        "resource_name": name,
                        "pattern_type": pattern,
                        "operation": op,
                        "permission": "DENY" if deny else "ALLOW",
                    }
                    for op in ops
                ],
            )
            assert r.status_code == 201, r.text

    def consumer(
        self, user: str, group: str, password: str | None = None, **extra
    ) -> ShareConsumer:
        return ShareConsumer(
            {
                "bootstrap.servers": f"127.0.0.1:{self.sasl}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user,
                "sasl.password": password or PASSWORDS[user],
                "group.id": group,
                **extra,
            }
        )


def secure_proxy(upstream: str, postgres: TemporaryPostgres, tls_dir: Path) -> Iterator[Secure]:
    """Started with a user per PASSWORDS (admin a super user); stopped after, failing if it
    logged an error."""
    ca = CertificateAuthority(tls_dir)
    cert, key = ca.issue("server", "localhost", server=True)
    url = postgres.create_database(f"sec{uuid.uuid4().hex[:6]}", template="template_migrated")
    for name, password in PASSWORDS.items():
        add_user(url, name, password)
    sasl_ssl, ssl = free_port(), free_port()
    p = ProxyProcess(
        upstream,
        url,
        auto_offset_reset="earliest",
        log_format="json",
        super_users="User:admin",
        ssl_certfile=cert,
        ssl_keyfile=key,
        ssl_cafile=ca.ca_file,
        ssl_client_auth="requested",
    )
    p.options["listeners"] = (
        f"SASL_PLAINTEXT://127.0.0.1:{p.port},SASL_SSL://127.0.0.1:{sasl_ssl},SSL://127.0.0.1:{ssl}"
    )
    try:
        p.start()
        yield Secure(p, sasl_ssl, ssl, ca)
    finally:
        p.stop()
    errors = [
        x for x in p.log().splitlines() if '"level": "ERROR"' in x or x.startswith("Traceback")
    ]
    assert not errors, "the proxy logged errors:\n" + "\n".join(errors)
