"""Listener specs: ``PLAINTEXT://0.0.0.0:9092,SASL_SSL://0.0.0.0:9094`` as Kafka writes them.
A listener is named by its security protocol (one listener per protocol)."""

from __future__ import annotations

import functools
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
EVERY_ADDRESS = ("0.0.0.0", "::", "")


@functools.cache
def host_name() -> str:
    """This machine's name as other machines know it, which Kafka advertises for a listener
    on every address (the canonical host name): the fully qualified name, unless that is only
    localhost (a host whose own name maps to 127.0.0.1), then the plain host name."""
    fqdn = socket.getfqdn()
    return socket.gethostname() if fqdn.partition(".")[0] == "localhost" else fqdn


def split_host_port(value: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    """``HOST:PORT`` (or ``:PORT``) → (host, port); ValueError with a clear message otherwise."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r} is not HOST:PORT")
    return (host.strip("[]") or default_host), int(port)


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    protocol: str
    host: str
    port: int

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")


def parse_listeners(text: str, default_host: str = "0.0.0.0") -> list[ListenerSpec]:
    """ValueError with a clear message for anything else."""
    specs: list[ListenerSpec] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        protocol, sep, address = item.partition("://")
        protocol = protocol.upper()
        if not sep or protocol not in PROTOCOLS:
            raise ValueError(
                f"listener {item!r} is not PROTOCOL://HOST:PORT with PROTOCOL one of "
                + ", ".join(PROTOCOLS)
            )
        if any(s.protocol == protocol for s in specs):
            raise ValueError(f"more than one {protocol} listener")
        host, port = split_host_port(address, default_host)
        specs.append(ListenerSpec(protocol, host, port))
    if not specs:
        raise ValueError("no listener given")
    return specs


def server_ssl_context(
    certfile: str, keyfile: str | None, cafile: str | None, client_auth: str
) -> ssl.SSLContext:
    """TLS for a listener; ``client_auth`` none | requested | required (Kafka's
    ssl.client.auth). Client certificates are checked against ``cafile``."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=cafile)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile)
    ctx.verify_mode = {
        "none": ssl.CERT_NONE,
        "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[client_auth]
    return ctx


def certificate_principal(peercert: dict | None) -> str | None:
    """``User:CN=alice,OU=eng,O=acme`` — the subject as an RFC 2253 name (most specific first),
    as Kafka's default SSL principal builder makes it."""
    if not peercert or not peercert.get("subject"):
        return None
    rdns = []
    for rdn in reversed(peercert["subject"]):
        rdns.append("+".join(f"{_SHORT.get(k, k)}={_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(rdns)


_SHORT = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def plan(
    listeners: str | None,
    listen: str,
    advertised: str | None,
    advertised_one: str | None,
    named: Callable[[ListenerSpec], None] = lambda spec: None,
) -> list[tuple[ListenerSpec, tuple[str, int]]]:
    """Each listener with the address clients are told for it: from ``advertised`` (same
    format), else ``advertised_one`` (HOST:PORT) for the first listener, else its bind address;
    a listener on every address is advertised under this machine's name (``named`` is told),
    as Kafka does: localhost would send remote clients to themselves."""
    specs = parse_listeners(listeners or f"PLAINTEXT://{listen}")
    told = {s.protocol: (s.host, s.port) for s in parse_listeners(advertised)} if advertised else {}
    out = []
    for i, spec in enumerate(specs):
        if spec.protocol in told:
            address = told[spec.protocol]
        elif i == 0 and advertised_one:
            address = split_host_port(advertised_one, "localhost")
        elif spec.host in EVERY_ADDRESS:
            address = (host_name(), spec.port)
            named(spec)
        else:
            address = (spec.host, spec.port)
        out.append((spec, address))
    unknown = set(told) - {s.protocol for s in specs}
    if unknown:
        raise ValueError(f"advertised listeners {sorted(unknown)} have no listener")
    return out


def client_ssl_context(
    cafile: str | None, certfile: str | None, keyfile: str | None
) -> ssl.SSLContext:
    """TLS toward the upstream cluster (server verified against ``cafile`` or system CAs)."""
    ctx = ssl.create_default_context(cafile=cafile)
    if certfile:
        ctx.load_cert_chain(certfile, keyfile)
    return ctx
