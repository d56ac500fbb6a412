"""A test module imports what it shares with others from tests/support, never from another test
module or a conftest: each tier's files can then be moved, split or run alone."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_module_imports_another_test_module_or_a_conftest():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if "support" in path.relative_to(TESTS).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "tests" and len(parts) > 1 and parts[1] != "support":
                    found.append(f"{path.relative_to(TESTS)} imports {name}")
    assert not found, found
