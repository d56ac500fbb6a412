"""The release artifacts and the image without a container engine: the sdist and the wheel are
built as a release builds them (``python -m build``: the sdist, then the wheel from it) and
checked as PyPI checks them; the image's wheel is built from exactly the files the Dockerfile's
build stage copies (by its own RUN line), holds the same files as the release's, is installed
into a clean virtualenv, and the compose service's command runs from it against a real broker
and Postgres."""

from __future__ import annotations

import email
import fnmatch
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import venv
import zipfile
from pathlib import Path

import httpx
import pytest
import yaml
from packaging.specifiers import SpecifierSet

from shareproxy import __version__
from shareproxy.demo.tansu import TansuBroker
from shareproxy.host.processes import free_port

pytestmark = pytest.mark.long

ROOT = Path(__file__).resolve().parents[2]


def build_stage() -> tuple[str, list[tuple[str, str]], str]:
    """(WORKDIR, [(source, destination)] of its COPY lines, its RUN line) of the stage
    named ``build``."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("FROM ") and " AS build" in x)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("FROM ")), None)
    workdir, copies, run = "/", [], ""
    for line in lines[start + 1 : end]:
        words = shlex.split(line) if line and not line.startswith("#") else []
        if words[:1] == ["WORKDIR"]:
            workdir = words[1]
        elif words[:1] == ["COPY"]:
            *sources, dest = words[1:]
            copies += [(src, dest) for src in sources]
        elif words[:1] == ["RUN"]:
            run = line.removeprefix("RUN ")
    return workdir, copies, run


def ignored(relative: str, patterns: list[str]) -> bool:
    """.dockerignore, as far as this project's patterns go (``**/`` matches any depth)."""
    parts = relative.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        for prefix in prefixes:
            name = prefix.rsplit("/", 1)[-1]
            if fnmatch.fnmatch(prefix, pattern) or (bare != pattern and name == bare):
                return True
    return False


def stage_context(into: Path) -> str:
    """Copy what the build stage copies into ``into`` (as its WORKDIR); its RUN line."""
    workdir, copies, run = build_stage()
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines() if p.strip()]
    assert workdir.startswith("/") and copies and run.startswith("pip wheel"), (workdir, run)
    for src, dest in copies:
        for path in [ROOT / src] if (ROOT / src).is_file() else sorted((ROOT / src).rglob("*")):
            relative = path.relative_to(ROOT).as_posix()
            if path.is_dir() or ignored(relative, patterns):
                continue
            inside = relative if not (ROOT / src).is_file() else Path(src).name
            if (ROOT / src).is_dir():
                inside = (Path(dest) / path.relative_to(ROOT / src)).as_posix()
            elif not dest.endswith("/"):
                inside = dest
            target = into / inside
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    return run


def tree(top: str) -> set[str]:
    """The files under a folder of the checkout, as paths relative to it."""
    return {
        p.relative_to(ROOT / top).as_posix()
        for p in (ROOT / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def under(names: list[str], prefix: str) -> set[str]:
    """The files of an archive's listing under ``prefix``, relative to it."""
    return {n.removeprefix(prefix) for n in names if n.startswith(prefix) and not n.endswith("/")}


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> tuple[Path, Path]:
    """(sdist, wheel) as ``python -m build`` makes them: the wheel is built from the sdist."""
    out = tmp_path_factory.mktemp("release")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (sdist,) = out.glob("shareproxy-*.tar.gz")
    (wheel,) = out.glob("shareproxy-*.whl")
    assert sdist.name == f"shareproxy-{__version__}.tar.gz"
    assert wheel.name == f"shareproxy-{__version__}-py3-none-any.whl"
    return sdist, wheel


def test_twine_passes_the_sdist_and_the_wheel_strictly(release):
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, release)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout


def test_the_sdist_holds_the_sources_the_wheel_is_built_from(release):
    sdist, _ = release
    top = f"shareproxy-{__version__}/"
    with tarfile.open(sdist) as archive:
        names = [m.name for m in archive.getmembers() if m.isfile()]
    assert {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO"} <= under(names, top)
    for folder in ("shareproxy", "migrations", "spark", "dashboards"):
        assert under(names, f"{top}{folder}/") >= tree(folder), folder


def test_the_wheel_carries_migrations_console_dashboards_jobs_and_licence(release):
    _, wheel = release
    info = f"shareproxy-{__version__}.dist-info/"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        licence = archive.read(f"{info}licenses/LICENSE")
        metadata = archive.read(f"{info}METADATA").decode()
        entry_points = archive.read(f"{info}entry_points.txt").decode()
    assert under(names, "shareproxy/_migrations/") == tree("migrations")
    assert under(names, "shareproxy/admin/console/") == tree("shareproxy/admin/console")
    assert under(names, "shareproxy/_dashboards/") == tree("dashboards")
    assert tree("dashboards") >= {"overview.json", "share-group.json"}
    assert under(names, "shareproxy/_spark/") == tree("spark")
    assert licence == (ROOT / "LICENSE").read_bytes()
    assert f"\nVersion: {__version__}\n" in metadata
    assert "shareproxy = shareproxy.cli.launch:main" in entry_points


def test_the_wheel_declares_exactly_the_pythons_ci_runs(release):
    """Requires-Python and the classifiers name the same minor versions, and
    .ci/python-versions has an interpreter for each (it runs the unit tier on every one that
    is not CI's own)."""
    _, wheel = release
    with zipfile.ZipFile(wheel) as archive:
        metadata = email.message_from_bytes(
            archive.read(f"shareproxy-{__version__}.dist-info/METADATA")
        )
    allowed = SpecifierSet(metadata["Requires-Python"])
    minors = [f"3.{m}" for m in range(30) if f"3.{m}" in allowed]
    assert minors, str(allowed)
    prefix = "Programming Language :: Python :: 3."
    classified = [
        c.rpartition(" ")[2] for c in metadata.get_all("Classifier") if c.startswith(prefix)
    ]
    assert classified == minors, (classified, str(allowed))
    script = (ROOT / ".ci" / "python-versions").read_text()
    (sources,) = re.findall(r"^declare -A SOURCE=\((.*)\)$", script, re.MULTILINE)
    assert set(minors) <= set(re.findall(r"\[(3\.\d+)\]=", sources)), sources


@pytest.fixture(scope="module")
def image_wheel(tmp_path_factory) -> Path:
    """The wheel the image's build stage makes, from the files it copies."""
    base = tmp_path_factory.mktemp("image")
    context, wheels = base / "src", base / "wheels"
    run = stage_context(context)
    args = shlex.split(run)[2:]  # after "pip wheel"
    args = [str(wheels) if a == "/wheels" else a for a in args]
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", *args],
        cwd=context,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheels.glob("shareproxy-*.whl")
    assert wheel.name.startswith(f"shareproxy-{__version__}-")
    return wheel


def test_the_image_wheel_is_the_release_wheel(image_wheel, release):
    """The same files with the same metadata: what the image's tests prove holds for the
    release too, and the image carries everything a release does."""
    _, wheel = release
    with zipfile.ZipFile(image_wheel) as image, zipfile.ZipFile(wheel) as published:
        assert sorted(image.namelist()) == sorted(published.namelist())
        for name in published.namelist():
            if not name.endswith("/RECORD"):
                assert image.read(name) == published.read(name), name


@pytest.fixture(scope="module")
def installed(tmp_path_factory, image_wheel) -> Path:
    """A clean virtualenv with the image's wheel, on the same dependency versions as this run."""
    base = tmp_path_factory.mktemp("installed")
    wheel = image_wheel
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)  # no system site-packages: only what the wheel needs
    frozen = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pins = base / "pins.txt"
    pins.write_text("".join(x + "\n" for x in frozen.splitlines() if "shareproxy" not in x))
    install = subprocess.run(
        [env_dir / "bin" / "python", "-m", "pip", "install", "-q", "-c", str(pins), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return env_dir


def in_venv(env_dir: Path, *args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        list(args), capture_output=True, text=True, env={**env, **kwargs.pop("env", {})}, **kwargs
    )


def test_the_wheel_carries_migrations_jobs_and_types_and_nothing_of_the_demo(installed, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    python = str(installed / "bin" / "python")
    where = in_venv(
        installed, python, "-c", "import shareproxy; print(shareproxy.__file__)", cwd=outside
    )
    package = Path(where.stdout.strip()).parent
    assert package.is_relative_to(installed), where.stdout + where.stderr
    assert (package / "py.typed").is_file()
    assert {p.name for p in (package / "_spark").glob("*.py")} >= {"reconcile.py", "report.py"}
    console = {p.name for p in (package / "admin" / "console").iterdir()}
    assert console >= {"index.html", "console.css", "app.js", "api.js", "dom.js", "push.js"}, (
        console
    )
    files = in_venv(
        installed,
        python,
        "-c",
        "from importlib import metadata; print([p.name for p in metadata.files('shareproxy')])",
        cwd=outside,
    )
    assert "'LICENSE'" in files.stdout, files.stdout + files.stderr
    version = in_venv(installed, str(installed / "bin" / "shareproxy"), "--version", cwd=outside)
    assert version.stdout.strip() == __version__, version.stderr
    declared = in_venv(
        installed,
        python,
        "-c",
        "from importlib import metadata; print(metadata.version('shareproxy'))",
        cwd=outside,
    )
    assert declared.stdout.strip() == version.stdout.strip(), declared.stderr
    assert (package / "_dashboards" / "overview.json").is_file()
    migrated = in_venv(
        installed, "shareproxy", "migrate", "--state-url", f"sqlite:///{outside}/s.db", cwd=outside
    )
    assert migrated.returncode == 0 and "migrated" in migrated.stdout, migrated.stderr
    lean = in_venv(installed, python, "-c", "import confluent_kafka", cwd=outside)
    assert lean.returncode != 0, "the server image carries the demo's client"
    demo = in_venv(installed, "shareproxy", "demo", cwd=outside)
    assert demo.returncode == 2 and "pip install 'shareproxy[demo]'" in demo.stderr


def test_the_compose_services_command_serves_from_the_wheel(installed, postgres, tmp_path):
    """docker-compose.yml's entrypoint and environment for the proxy, from the clean venv,
    against a real broker and Postgres instead of the compose network's."""
    service = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["shareproxy"]
    port, admin = free_port(), free_port()
    env = {k: str(v) for k, v in service["environment"].items()}
    env.update(
        SHAREPROXY_STATE_URL=postgres.create_database("compose_cmd"),
        SHAREPROXY_LISTEN=f"127.0.0.1:{port}",
        SHAREPROXY_ADVERTISED_LISTENER=f"127.0.0.1:{port}",
        SHAREPROXY_ADMIN_LISTEN=f"127.0.0.1:{admin}",
    )
    assert service["entrypoint"][:2] == ["sh", "-c"]
    with TansuBroker() as broker:
        env["SHAREPROXY_BOOTSTRAP_SERVERS"] = broker.bootstrap
        log = (tmp_path / "proxy.log").open("wb")
        path = f"{installed / 'bin'}{os.pathsep}{os.environ['PATH']}"
        clean = {k: v for k, v in os.environ.items() if not k.startswith("SHAREPROXY_")}
        proc = subprocess.Popen(
            service["entrypoint"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**clean, "PATH": path, **env},
            cwd=tmp_path,
        )
        try:
            deadline, ready = time.monotonic() + 60, None
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    ready = httpx.get(f"http://127.0.0.1:{admin}/readyz", timeout=2)
                    if ready.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            assert ready is not None and ready.status_code == 200, tmp_path / "proxy.log"
            page = httpx.get(f"http://127.0.0.1:{admin}/ui/", timeout=5)  # the web console
            script = httpx.get(f"http://127.0.0.1:{admin}/ui/assets/app.js", timeout=5)
            assert page.status_code == 200 and "/ui/assets/app.js" in page.text, page.text
            assert script.status_code == 200 and "javascript" in script.headers["content-type"]
            proc.send_signal(signal.SIGTERM)  # exec: the signal reaches the server itself
            assert proc.wait(20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    text = (tmp_path / "proxy.log").read_text()
    assert '"message": "stopped"' in text, text  # JSON logs, as the service sets
