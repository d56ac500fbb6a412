"""The files a team checks before adopting the project: the licence text matches the licence
the package declares, and the security policy says where to report a vulnerability."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from shareproxy import __version__

ROOT = Path(__file__).resolve().parents[2]


def test_the_licence_file_is_the_licence_the_package_declares():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert declared == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_security_policy_says_how_to_report_a_vulnerability_privately():
    policy = (ROOT / "SECURITY.md").read_text()
    assert "Report a vulnerability" in policy and "privately" in policy


def test_the_image_is_labelled_with_the_version_and_the_licence():
    labels = dict(
        re.findall(
            r'org\.opencontainers\.image\.(\w+)="([^"]*)"', (ROOT / "Dockerfile").read_text()
        )
    )
    assert labels["version"] == __version__
    assert labels["licenses"] == "Apache-2.0"
    assert labels["title"] == "shareproxy"
