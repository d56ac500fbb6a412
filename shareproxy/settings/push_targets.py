"""Push delivery (beyond KIP-932): which endpoints the proxy may push to. The node setting
``--push-allowed-urls`` lists URL prefixes, so that a group's admin cannot aim the proxy at
internal services; none listed, push is off. A prefix is matched as a URL, not as a string:
the scheme, the host and the port must be equal, and the path must continue the prefix's at a
segment boundary, so ``https://hooks.example.com/in`` allows
``https://hooks.example.com/in/orders`` but not ``https://hooks.example.com.evil.net/in``,
``https://hooks.example.com/inside`` or ``http://hooks.example.com/in``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


class PushTargetError(ValueError):
    """A URL the proxy does not push to, and why (a client's 400 or 403)."""


@dataclass(frozen=True, slots=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: str  # without a trailing slash ("" for the root)


def _target(url: str) -> _Target:
    """The parts of an http(s) URL that decide where a push goes."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise PushTargetError(f"{url!r} is not a URL: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise PushTargetError(f"{url!r} is not an http or https URL")
    if not parts.hostname:
        raise PushTargetError(f"{url!r} names no host")
    if parts.username is not None or parts.password is not None:
        raise PushTargetError(
            f"{url!r} carries credentials: give them as the push's authorization instead"
        )
    if parts.fragment:
        raise PushTargetError(f"{url!r} has a fragment, which a request cannot carry")
    segments = [unquote(segment) for segment in parts.path.split("/")]
    if any(s in (".", "..") or "/" in s or "\\" in s for s in segments):
        # a server resolves them: /in/../admin, or /in/x%2F..%2Fadmin where it decodes
        # slashes first, would leave the allowed path
        raise PushTargetError(f"{url!r} has a '.' or '..' path segment, or an encoded slash")
    return _Target(
        scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme], parts.path.rstrip("/")
    )


@dataclass(frozen=True, slots=True)
class PushTargets:
    """The URL prefixes pushes may go to (none: push is off on this node)."""

    prefixes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, listed: str | Iterable[str]) -> PushTargets:
        """From the setting (comma-separated, or a list); each prefix checked as a URL."""
        items = listed.split(",") if isinstance(listed, str) else list(listed)
        prefixes = tuple(p.strip() for p in items if p.strip())
        for p in prefixes:
            _target(p)  # a wrong setting fails at start, not at the first push
        return cls(prefixes)

    @property
    def enabled(self) -> bool:
        return bool(self.prefixes)

    def check(self, url: str) -> None:
        """Raise ``PushTargetError`` unless ``url`` may be pushed to."""
        if not self.enabled:
            raise PushTargetError("push is off on this node: --push-allowed-urls lists no URL")
        target = _target(url)
        for prefix in self.prefixes:
            allowed = _target(prefix)
            if (target.scheme, target.host, target.port) != (
                allowed.scheme,
                allowed.host,
                allowed.port,
            ):
                continue
            if target.path == allowed.path or target.path.startswith(allowed.path + "/"):
                return
        raise PushTargetError(f"{url!r} is not under any URL --push-allowed-urls allows")
