"""An older build of shareproxy, taken from this clone's history and run by the current venv:
the other half of a rolling upgrade."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
# what `git archive` takes: the package, and the migrations it finds beside it when it is not
# installed (persistence/migrate.migrations_dir)
PARTS = ("shareproxy", "migrations")


class OldBuildMissing(RuntimeError):
    """The commit is not in this clone (a shallow one), or this is not a git clone."""


class OldBuild:
    """``commit``'s shareproxy under ``root``, run as ``python -m shareproxy.cli`` with the
    archive first on the import path: its dependencies are a subset of the current ones."""

    def __init__(self, commit: str, root: Path) -> None:
        self.commit, self.root = commit, root
        # PYTHONSAFEPATH: `python -m` would put the working directory first on the path, and
        # from a checkout that is the current build's package
        self.env = {"PYTHONPATH": str(root), "PYTHONSAFEPATH": "1"}

    @classmethod
    def materialise(cls, commit: str, root: Path) -> OldBuild:
        def git(*args: str) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run(
                ["git", "-C", str(REPOSITORY), *args], capture_output=True, timeout=60
            )

        try:
            found = git("cat-file", "-e", f"{commit}^{{commit}}")
        except OSError as exc:
            raise OldBuildMissing(f"git could not run: {exc}") from exc
        if found.returncode != 0:
            raise OldBuildMissing(
                f"commit {commit} is not in {REPOSITORY}'s history "
                f"({found.stderr.decode().strip() or 'not found'}): a shallow clone? "
                "`git fetch --unshallow` brings it"
            )
        archive = git("archive", "--format=tar", commit, *PARTS)
        if archive.returncode != 0:
            raise OldBuildMissing(f"git archive {commit}: {archive.stderr.decode().strip()}")
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
        return cls(commit, root)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``python *args`` with this build first on the import path."""
        return subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **self.env},
        )

    def shareproxy(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("-m", "shareproxy.cli", *args)

    def imported(self) -> tuple[Path, str]:
        """Where ``import shareproxy`` finds the package, and the schema head it serves."""
        shown = self.run(
            "-c",
            "import shareproxy, shareproxy.persistence.migrate as m;"
            "print(shareproxy.__file__); print(m.SCHEMA_HEAD)",
        )
        assert shown.returncode == 0, shown.stderr
        where, head = shown.stdout.split()
        return Path(where), head
