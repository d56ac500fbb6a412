"""Dependencies point down (ARCHITECTURE.md): the import-linter contracts in pyproject.toml
hold, and no module imports itself back through others."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    proc = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def _cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(imports.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    graph = grimp.build_graph("shareproxy")
    imports = {
        m: {d for d in graph.find_modules_directly_imported_by(m) if d in graph.modules}
        for m in graph.modules
    }
    # a package's __init__ is imported by its own modules implicitly; only real imports count
    assert _cycles(imports) == []


def test_architecture_md_names_only_what_exists():
    """Every file, folder and ``module.name`` ARCHITECTURE.md points at is in the repository."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    missing = []
    for token in sorted(set(re.findall(r"`([\w./]+(?:\.py|\.toml|/))`", text))):
        candidates = [ROOT / token, ROOT / "shareproxy" / token]
        found = any(c.exists() for c in candidates) or any(ROOT.glob(f"shareproxy/**/{token}"))
        if not found:
            missing.append(token)
    assert missing == []
    for path, name in re.findall(r"`([a-z_]+(?:/[a-z_]+)+)\.([A-Za-z_]+)`", text):
        if name == "py":
            continue
        source = ROOT / "shareproxy" / f"{path}.py"
        if source.exists():
            defined = rf"\b(def|class) {name}\b|^{name}\b"
            assert re.search(defined, source.read_text(), re.M), f"{path}.{name}"
