"""MkDocs hook: adds the pages made from the code and from the repository's root files to the
build, in memory. Each has one source, so none is kept by hand and none can fall behind it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from shareproxy_docs import cli, configuration, exit_codes, included, rest

ROOT = Path(__file__).resolve().parents[2]
# the repository's root files the site shows -> their pages
INCLUDED = {"BENCHMARKS.md": "benchmarks.md", "CHANGELOG.md": "changelog.md"}
GENERATED: dict[str, Callable[[], str]] = {
    "reference/configuration.md": configuration.page,
    "reference/cli.md": cli.page,
    "reference/rest.md": rest.page,
    "reference/exit-codes.md": exit_codes.page,
}


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    pages: dict[str, Callable[[], str]] = dict(GENERATED)
    for name, page in INCLUDED.items():
        pages[page] = functools.partial(included.page, ROOT, name, INCLUDED, config.repo_url)
    for uri, render in pages.items():
        if files.get_file_from_path(uri) is not None:
            raise PluginError(f"docs/{uri} is generated when the site is built: remove the file")
        files.append(File.generated(config, uri, content=render()))
    return files


def on_serve(server: Any, *, config: MkDocsConfig, builder: Callable[..., Any]) -> Any:
    """``mkdocs serve`` rebuilds when an included root file changes, as for a page."""
    for name in INCLUDED:
        server.watch(str(ROOT / name))
    return server
