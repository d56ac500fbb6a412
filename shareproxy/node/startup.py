"""What the proxy checks and prepares before it serves: how a socket that cannot listen is
reported, TLS contexts built from the settings' files, and the upstream cluster
reached with backoff, each failed try logged with a one-line hint saying which setting to check."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import ssl
from collections.abc import Iterator

from shareproxy.core.failures import AddressRefused, BadInput, Unreachable
from shareproxy.security import listeners
from shareproxy.settings.model import Settings
from shareproxy.telemetry.logs import first_line
from shareproxy.upstream.client import Upstream, UpstreamError, UpstreamSettings

MAX_RETRY_DELAY_S = 30.0
log = logging.getLogger("shareproxy")


class UpstreamUnavailable(Unreachable):
    """The upstream cluster could not be reached and ``fail_fast`` is on."""


def upstream_hint(s: Settings, exc: Exception) -> str:
    text = f"{exc} {exc.__cause__!r}"
    if "Sasl" in text or "SASL" in text or "authentication" in text.lower():
        return (
            "check --upstream-sasl-mechanism, --upstream-sasl-username and "
            "SHAREPROXY_UPSTREAM_SASL_PASSWORD"
        )
    if "SSL" in text or "certificate" in text.lower():
        return "check --upstream-security-protocol and --upstream-ssl-cafile"
    return f"check --bootstrap-servers ({s.bootstrap_servers}) and that the cluster is up"


@contextlib.contextmanager
def listen_errors(what: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:  # socket.gaierror too: a host name that does not resolve
        reason = {
            errno.EADDRINUSE: "address already in use",
            errno.EACCES: "permission denied (ports below 1024 need privileges)",
            errno.EADDRNOTAVAIL: "not an address of this host",
        }.get(exc.errno or 0, first_line(exc))
        raise AddressRefused(f"{what}: {reason}") from exc


def listener_tls(s: Settings) -> ssl.SSLContext | None:
    if not s.ssl_certfile:
        return None
    try:
        return listeners.server_ssl_context(
            s.ssl_certfile, s.ssl_keyfile, s.ssl_cafile, s.ssl_client_auth
        )
    except (ssl.SSLError, OSError) as exc:
        files = " ".join(
            f"--{n.replace('_', '-')} {getattr(s, n)}"
            for n in ("ssl_certfile", "ssl_keyfile", "ssl_cafile")
            if getattr(s, n)
        )
        raise BadInput(f"{files}: not a usable PEM certificate and key: {first_line(exc)}") from exc


def upstream_settings(s: Settings) -> UpstreamSettings:
    """How the proxy itself authenticates to the upstream cluster."""
    tls = None
    if s.upstream_security_protocol in ("SSL", "SASL_SSL"):
        try:
            tls = listeners.client_ssl_context(
                s.upstream_ssl_cafile, s.upstream_ssl_certfile, s.upstream_ssl_keyfile
            )
        except (ssl.SSLError, OSError) as exc:
            raise BadInput(
                f"--upstream-ssl-cafile {s.upstream_ssl_cafile}: not usable: {first_line(exc)}"
            ) from exc
    sasl = s.upstream_security_protocol.startswith("SASL_")
    return UpstreamSettings(
        s.bootstrap_servers,
        security_protocol=s.upstream_security_protocol,
        sasl_mechanism=s.upstream_sasl_mechanism if sasl else None,
        sasl_plain_username=s.upstream_sasl_username if sasl else None,
        sasl_plain_password=(
            s.upstream_sasl_password.get_secret_value()
            if sasl and s.upstream_sasl_password
            else None
        ),
        ssl_context=tls,
    )


async def connect_upstream(upstream: Upstream, settings: Settings) -> None:
    """Retry with backoff until the cluster answers, one line per try saying what to
    check; with ``fail_fast``, give up at the first failure."""
    s = settings
    delay, attempt = 0.5, 1
    while True:
        try:
            await upstream.start()
        except UpstreamError as exc:
            hint = upstream_hint(s, exc)
            if s.fail_fast:
                raise UpstreamUnavailable(
                    f"--bootstrap-servers {s.bootstrap_servers}: {exc} ({hint})"
                ) from exc
            log.warning(
                "upstream not reachable yet (attempt %d): %s; retrying in %.1fs; %s",
                attempt,
                exc,
                delay,
                hint,
                extra={"attempt": attempt, "retry_in_s": delay},
            )
            await asyncio.sleep(delay)
            delay, attempt = min(delay * 2, MAX_RETRY_DELAY_S), attempt + 1
            continue
        if attempt > 1:
            log.info("upstream %s reached after %d attempts", s.bootstrap_servers, attempt)
        return
