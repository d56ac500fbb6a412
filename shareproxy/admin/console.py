"""The web console at /ui: static HTML, CSS and JavaScript modules (no build step, nothing
from the internet) whose pages call only the REST API, so a principal sees and changes exactly
what the API lets it. The page itself asks for the same credentials as the API: with
authentication on, the 401 and its Basic challenge make the browser ask for a user and password
once and send them with the page's calls."""

from __future__ import annotations

from html import escape
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from shareproxy.admin.auth import CHALLENGE, Unauthenticated, current_caller

ASSETS = Path(__file__).with_name("console")
PREFIX = "/ui"
# the page loads only its own files; inline script and event handlers never run, whatever a
# name from the cluster holds (the pages also write such names as text only)
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
)
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

SIGN_IN_FAILED = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Sign-in failed · shareproxy</title>
<link rel="stylesheet" href="/ui/assets/console.css"></head>
<body><main id="main">
<h1>Sign-in failed</h1>
<p class="refusal" id="signin-problem">The console could not sign you in: {why}.</p>
<p>Reload the page to enter a user name and password again (the proxy's users, as for SASL).</p>
</main></body>
</html>
"""


def install(app: FastAPI) -> None:
    """/ui (and /ui/ with any route after the #) the page; /ui/assets/… its files; / sends a
    browser pointed at the admin listener to the console, the only page it serves."""

    async def root() -> RedirectResponse:
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    app.add_api_route("/", root, methods=["GET"], include_in_schema=False)

    async def index(request: Request) -> Response:
        try:
            await current_caller(request)
        except Unauthenticated as exc:  # the challenge, and a page a person can read
            return HTMLResponse(
                SIGN_IN_FAILED.format(why=escape(str(exc))),
                401,
                headers={**HEADERS, "WWW-Authenticate": CHALLENGE},
            )
        return FileResponse(ASSETS / "index.html", media_type="text/html", headers=HEADERS)

    app.add_api_route(PREFIX, index, methods=["GET"], include_in_schema=False)
    app.add_api_route(f"{PREFIX}/", index, methods=["GET"], include_in_schema=False)
    app.mount(f"{PREFIX}/assets", StaticFiles(directory=ASSETS), name="console")
