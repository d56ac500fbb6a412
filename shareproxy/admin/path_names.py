"""Names in REST paths as clients encode them. Kafka takes any group id, '/' and '%' included,
and a client sends those as %2F and %25 (the console's encodeURIComponent, the CLI's quote).
The ASGI server decodes the whole path before routing, so an encoded '/' became a separator
and such a group could not be reached. Routing here reads the path as it came (``raw_path``):
each segment is decoded except its '%' and '/', and the ``name`` convertors decode those once
the route is chosen, so a route's parameter is the name exactly as the client meant it."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send


def _kept(decoded: str) -> str:
    """A decoded segment with its '%' and '/' encoded again: what routing may see."""
    return decoded.replace("%", "%25").replace("/", "%2F")


def routed_path(raw_path: bytes) -> str:
    """The path routing matches: each segment of ``raw_path`` decoded, but for '%' and '/'."""
    text = raw_path.decode("latin-1")
    return "/".join(_kept(unquote(segment)) for segment in text.split("/"))


class RawSegments:
    """ASGI middleware: routes on ``routed_path``; without a raw path (the server gave none),
    on the decoded path with its '%' kept, so a name convertor still decodes it exactly."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            raw = scope.get("raw_path")
            path = routed_path(raw) if raw else scope["path"].replace("%", "%25")
            scope = {**scope, "path": path}
        await self.app(scope, receive, send)


class _Name(Convertor[str]):
    """One path segment holding a name: ``{group_id:name}``."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return unquote(value)

    def to_string(self, value: str) -> str:
        return quote(value, safe="")


class _NameToEnd(_Name):
    """A name that may also arrive with its '/' unencoded, as the path's last parameter
    (a member id in standard base64); an empty one still reaches the route, whose check
    names the problem."""

    regex = ".*"


def sent_path(request: Request) -> str:
    """The path exactly as the client sent it, to pass the call on to another node."""
    raw: Any = request.scope.get("raw_path")
    if raw:
        return str(raw.decode("latin-1"))
    return quote(unquote(request.scope["path"]), safe="/")  # what RawSegments left of it


def sent_query(request: Request) -> str:
    """The query string exactly as the client sent it (the parsed URL would take a '?' in a
    decoded name for the query's start)."""
    return str(request.scope.get("query_string", b"").decode("latin-1"))


register_url_convertor("name", _Name())
register_url_convertor("name_to_end", _NameToEnd())
