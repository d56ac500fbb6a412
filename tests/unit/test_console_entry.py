"""The admin listener's root sends a browser to the web console: someone who opens the address
the start-up line names, without a path, lands on the console rather than a 404."""

from __future__ import annotations

import httpx

from tests.support.admin_app import Directory, Grants, Places, admin_app, serving


async def test_the_root_redirects_to_the_console_without_credentials():
    async with (
        serving(admin_app(Places(), Grants(), Directory())) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
    ):
        answer = await http.get("/")
        assert answer.status_code in (307, 308), answer.text
        assert answer.headers["location"] == "/ui/"
        page = await http.get("/", headers={"Authorization": "Bearer alice"}, follow_redirects=True)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
