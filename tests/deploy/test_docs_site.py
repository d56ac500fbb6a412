"""The documentation site builds with ``mkdocs build --strict`` (a broken link or anchor, or a
page left out of the nav, is an error), and its generated reference pages leave nothing out:
each setting, group config, command and route the code has is compared with the built pages,
so a new one cannot go undocumented. External links are well formed and lead off this machine."""

from __future__ import annotations

import html
import importlib.util
import ipaddress
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer.main

from shareproxy.cli.app import app as cli_app
from shareproxy.core import group_config
from shareproxy.host import exits
from shareproxy.settings.model import ENV_PREFIX, Settings
from tests.support.admin_app import Directory, Grants, Places, admin_app

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 180
GENERATED = (
    "reference/configuration",
    "reference/cli",
    "reference/rest",
    "reference/exit-codes",
    "benchmarks",
    "changelog",
)
_HEADING = re.compile(r"<h([1-6])[^>]*>(.*?)</h\1>", re.DOTALL)
_ID = re.compile(r'\sid="([^"]+)"')
_HREF = re.compile(r'<a\s[^>]*href="([^"]*)"')
_TAG = re.compile(r"<[^>]+>")
_LOCAL_HOSTS = {"localhost", "localhost.localdomain", "ip6-localhost"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as CI and a contributor build it, into a fresh directory."""
    assert importlib.util.find_spec("mkdocs") and importlib.util.find_spec("material"), (
        "mkdocs and mkdocs-material are missing: pip install -e '.[test]' (or '.[docs]')"
    )
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    started = time.monotonic()
    run = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
    )
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}{run.stderr}"
    print(f"site built in {time.monotonic() - started:.1f} s")
    return out


def _page(site: Path, name: str) -> str:
    path = site / name / "index.html"
    assert path.is_file(), f"{name} is not in the built site"
    return path.read_text(encoding="utf-8")


def _article(page: str) -> str:
    """The page's own content, without the theme's navigation around it."""
    return page.split("<article", 1)[1].split("</article>", 1)[0]


def _plain(fragment: str) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", fragment)).replace("¶", " ").split())


def _headings(page: str) -> set[str]:
    return {_plain(text) for _, text in _HEADING.findall(_article(page))}


def test_every_generated_page_says_what_it_is_generated_from(site: Path):
    for name in GENERATED:
        first = re.search(r"<p>(.*?)</p>", _article(_page(site, name)), re.DOTALL)
        assert first and _plain(first[1]).startswith("Generated when the site is built, from"), name


def test_every_setting_and_group_config_is_on_the_configuration_page(site: Path):
    page = _page(site, "reference/configuration")
    ids = set(_ID.findall(page))
    text = _plain(_article(page))
    missing = [name for name in Settings.model_fields if name not in ids]
    assert not missing, f"settings missing from the configuration page: {missing}"
    missing = [n for n in Settings.model_fields if f"{ENV_PREFIX}{n.upper()}" not in text]
    assert not missing, f"settings whose environment variable is not named: {missing}"
    missing = [name for name in group_config.DEFINITIONS if name not in ids]
    assert not missing, f"group configs missing from the configuration page: {missing}"


def _commands() -> Iterator[tuple[str, Any, Any]]:
    """Every command of the CLI, from the click tree typer builds, with its context."""
    root = typer.main.get_command(cli_app)
    stack = [("shareproxy", root, root.make_context("shareproxy", [], resilient_parsing=True))]
    while stack:
        path, command, ctx = stack.pop()
        yield path, command, ctx
        for name in getattr(command, "list_commands", lambda _: [])(ctx):
            sub = command.get_command(ctx, name)
            if not sub.hidden:
                sub_ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
                stack.append((f"{path} {name}", sub, sub_ctx))


def test_every_command_and_option_is_on_the_cli_page(site: Path):
    page = _page(site, "reference/cli")
    headings = _headings(page)
    text = _plain(_article(page))
    found = list(_commands())
    assert len(found) > 10 and any(path == "shareproxy serve" for path, _, _ in found)
    missing = [path for path, _, _ in found if path not in headings]
    assert not missing, f"commands missing from the CLI page: {missing}"
    options = {
        f"{path} {opt}"
        for path, command, ctx in found
        for param in command.get_params(ctx)
        if not getattr(param, "hidden", False)
        for opt in param.opts
        if opt.startswith("-") and opt not in text
    }
    assert not options, f"options missing from the CLI page: {sorted(options)}"
    assert "--version" in text


def test_every_route_is_on_the_rest_page(site: Path):
    document = admin_app(Places(), Grants(), Directory()).openapi()
    headings = _headings(_page(site, "reference/rest"))
    routes = [
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method in item
        if method in ("get", "put", "post", "patch", "delete", "head", "options")
    ]
    assert len(routes) > 20
    missing = [route for route in routes if route not in headings]
    assert not missing, f"routes missing from the REST page: {missing}"
    schemas = document.get("components", {}).get("schemas", {})
    missing = [name for name in schemas if name not in headings]
    assert not missing, f"schemas missing from the REST page: {missing}"


def test_every_exit_code_is_on_its_page(site: Path):
    table = _article(_page(site, "reference/exit-codes"))
    rows = {
        tuple(_plain(cell) for cell in re.findall(r"<td>(.*?)</td>", row, re.DOTALL)[:2])
        for row in re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL)
    }
    codes = {(str(v), n) for n, v in vars(exits).items() if n.isupper() and type(v) is int}
    assert len(codes) > 3 and codes <= rows, f"exit codes missing: {codes - rows}"


def _local(host: str) -> bool:
    if host in _LOCAL_HOSTS or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified or address.is_private


def test_external_links_are_well_formed_and_not_to_this_machine(site: Path):
    bad = []
    for path in sorted(site.rglob("*.html")):
        for href in _HREF.findall(path.read_text(encoding="utf-8")):
            url = html.unescape(href)
            if not url.startswith(("http:", "https:")):
                continue
            where = f"{path.relative_to(site)}: {url}"
            try:
                parts = urlsplit(url)
                parts.port  # noqa: B018  raises on a malformed port
            except ValueError as exc:
                bad.append(f"{where} ({exc})")
                continue
            host = parts.hostname or ""
            if host and _local(host):
                bad.append(f"{where} (points at this machine or a private network)")
            elif not host or any(c.isspace() for c in url) or not re.search(r"[.:]", host):
                bad.append(f"{where} (malformed)")
    assert not bad, "bad external links:\n" + "\n".join(bad)
