"""Pages that are files at the repository's root (BENCHMARKS.md, CHANGELOG.md), shown as they
are, their links made to work from the site: a link to another such file goes to its page, one
into ``docs/`` to that page, and one to anything else in the repository to the repository's
host (``repo_url``), or, where the site names none, it becomes its text."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from shareproxy_docs.markdown import generated_from

# an inline link or image, ``[text](target "title")``
_INLINE = re.compile(
    r"(?P<bang>!?)\[(?P<text>[^\]]*)\]\(\s*<?(?P<target>[^)\s>]+)>?(?P<rest>[^)]*)\)"
)
# a reference definition, ``[id]: target``
_REFERENCE = re.compile(r"^(?P<head>\s{0,3}\[[^\]]+\]:\s*<?)(?P<target>[^\s>]+)", re.MULTILINE)
_FENCE = re.compile(r"^\s*(```|~~~)")


def page(root: Path, name: str, pages: dict[str, str], repo_url: str | None) -> str:
    """``name`` (a root file) as the page ``pages[name]``; ``pages``: root file -> page path
    for every root file the site shows."""
    lines = (root / name).read_text(encoding="utf-8").splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and re.match(r"#\s", lines[first]):
        del lines[first]  # the theme titles the page from the nav, as every generated page
    links = _Links(root, posixpath.dirname(pages[name]), pages, repo_url)
    out, fenced = [], False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            line = _INLINE.sub(links.inline, line)
            line = _REFERENCE.sub(
                lambda m: m["head"] + (links.target(m["target"]) or m["target"]), line
            )
        out.append(line)
    return generated_from(f"`{name}` at the repository's root") + "\n".join(out) + "\n"


class _Links:
    def __init__(self, root: Path, at: str, pages: dict[str, str], repo_url: str | None) -> None:
        self.root, self.at, self.pages, self.repo_url = root, at, pages, repo_url

    def inline(self, match: re.Match[str]) -> str:
        target = self.target(match["target"])
        if target is None:
            return match["text"]
        return f"{match['bang']}[{match['text']}]({target}{match['rest']})"

    def target(self, target: str) -> str | None:
        """Where ``target``, written from the repository's root, points from the page; None
        where it has nowhere to point on the site."""
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith(("#", "/")):
            return target  # a URL, an anchor on this page, or a path on the site's host
        path, hash_, anchor = target.partition("#")
        resolved = posixpath.normpath(path)
        if resolved in self.pages:
            page_path = self.pages[resolved]
        elif resolved.startswith("docs/"):
            page_path = resolved.removeprefix("docs/")
        elif self.repo_url and not resolved.startswith("../"):
            kind = "tree" if (self.root / resolved).is_dir() else "blob"
            return f"{self.repo_url.rstrip('/')}/{kind}/HEAD/{resolved}{hash_}{anchor}"
        else:
            return None
        return posixpath.relpath(page_path, self.at or ".") + hash_ + anchor
