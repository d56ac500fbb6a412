"""Dependencies point down (ARCHITECTURE.md): the import-linter contracts in pyproject.toml
hold, and no module imports itself back through others."""

import ast
import importlib
import re
import shutil
import subprocess
import sys
import tomllib
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
    graph = grimp.build_graph("shareproxy", cache_dir=None)
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


def _layers(container: str) -> list[set[str]]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in contracts["contracts"] if c.get("containers") == [container]]
    return [{name.strip() for name in band.split("|")} for band in layers]


def test_the_root_holds_packages_only_each_saying_its_role():
    package = ROOT / "shareproxy"
    assert sorted(p.name for p in package.glob("*.py")) == ["__init__.py"]
    for init in package.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init.relative_to(ROOT)} says what its package is for"


def test_every_top_level_package_is_in_exactly_one_band():
    packages = {p.parent.name for p in (ROOT / "shareproxy").glob("*/__init__.py")}
    bands = _layers("shareproxy")
    named = [name for band in bands for name in band]
    assert sorted(named) == sorted(packages)  # each once, and nothing that is not a package


def test_every_room_of_the_runtime_is_in_exactly_one_band():
    runtime = ROOT / "shareproxy" / "runtime"
    rooms = {p.stem for p in runtime.glob("*.py") if p.name != "__init__.py"}
    rooms |= {p.parent.name for p in runtime.glob("*/__init__.py")}
    named = [name for band in _layers("shareproxy.runtime") for name in band]
    assert sorted(named) == sorted(rooms)


# what the core may not import though the standard library has it: I/O, clocks, chance, processes
NOT_PURE = {
    "asyncio", "concurrent", "ctypes", "http", "io", "logging", "multiprocessing", "os",
    "pathlib", "random", "secrets", "select", "selectors", "shutil", "signal", "socket",
    "sqlite3", "ssl", "subprocess", "sys", "tempfile", "threading", "time", "urllib",
}  # fmt: skip


def test_the_core_imports_only_the_standard_library_minus_io():
    graph = grimp.build_graph("shareproxy", include_external_packages=True, cache_dir=None)
    outside = {
        (module, imported)
        for module in graph.find_descendants("shareproxy.core")
        for imported in graph.find_modules_directly_imported_by(module)
        if not imported.startswith("shareproxy.core")
    }
    assert {
        (m, i) for m, i in outside if i not in sys.stdlib_module_names or i in NOT_PURE
    } == set()


# the rooms' faces: what a front end may import of the runtime (a new module is private)
FACES = {
    "shareproxy.runtime.consuming",
    "shareproxy.runtime.groups",
    "shareproxy.runtime.archive",
    "shareproxy.runtime.cluster",
    "shareproxy.runtime.directory",
}
FRONT_ENDS = ("shareproxy.kafka", "shareproxy.admin", "shareproxy.batch", "shareproxy.push")


def test_front_ends_import_only_the_faces_of_the_runtimes_rooms():
    graph = grimp.build_graph("shareproxy", cache_dir=None)
    reached = {
        (module, imported)
        for front_end in FRONT_ENDS
        for module in graph.find_descendants(front_end) | {front_end}
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("shareproxy.runtime")
    }
    assert reached, "the front ends call the runtime"
    assert {(m, i) for m, i in reached if i not in FACES} == set()


def test_each_face_exports_what_it_names():
    for face in FACES:
        module = importlib.import_module(face)
        names = getattr(module, "__all__", None)
        if names is None:  # a room of one module is its own face
            assert (ROOT / (face.replace(".", "/") + ".py")).exists(), face
            continue
        assert all(hasattr(module, name) for name in names), face
