"""What the deployment tests share: the repository's root, promtool, and the Kubernetes version
the manifests are validated against."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
# the version the manifests are checked against (they need 1.28, for the pod-index label):
# kubernetes-validate ships its schemas from its own 1.32, the floor of its range
KUBERNETES = "1.32.0"


def promtool(*args: str, cwd: Path = PROMETHEUS) -> None:
    """Run promtool (in deploy/prometheus by default); a missing promtool fails, it is never
    skipped."""
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: apt-get install prometheus (.ci/run does)"
    run = subprocess.run([tool, *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
