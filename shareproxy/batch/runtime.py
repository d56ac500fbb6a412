"""What every batch job shares: its command line, the Spark session with the data sources
registered, progress on stderr, and writing results (a table on stdout, JSON or Parquet)."""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from shareproxy.core.failures import BadInput, Failure
from shareproxy.host import exits, terminal
from shareproxy.settings import loader

EXIT_CLEAN, EXIT_DRIFT, EXIT_USAGE = exits.OK, exits.FAILED, exits.USAGE
stderr = Console(stderr=True)


def duration(text: str) -> timedelta:
    """``7d``, ``12h``, ``30m``, ``45s``, ``500ms`` (a number alone is minutes, as Kafka's
    offsets.retention.minutes)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", text)
    if m is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (try 7d, 12h, 30m, 45s)")
    value, unit = float(m.group(1)), m.group(2) or "m"
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    return timedelta(seconds=value * scale)


def parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Options shared by the jobs; unset ones fall back to the proxy's own settings
    (SHAREPROXY_* environment variables), so a job reads what the proxy writes."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--state-url", help="the proxy's state store (SHAREPROXY_STATE_URL)")
    ap.add_argument("--bootstrap-servers", help="the source cluster (SHAREPROXY_BOOTSTRAP_SERVERS)")
    ap.add_argument(
        "--upstream-security-protocol",
        choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
        help="the password comes from SHAREPROXY_UPSTREAM_SASL_PASSWORD",
    )
    ap.add_argument(
        "--upstream-sasl-mechanism", choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    )
    ap.add_argument("--upstream-sasl-username")
    ap.add_argument("--upstream-ssl-cafile")
    ap.add_argument(
        "--master",
        default=None,
        help="Spark master (default local[*]; under spark-submit, spark-submit's --master)",
    )
    ap.add_argument(
        "--output", type=Path, help="write the results here too: .json, or .parquet (a directory)"
    )
    ap.add_argument(
        "--parallelism", type=int, default=4, help="Spark partitions for the store and offsets"
    )
    return ap


def settings(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """(state URL, data-source options for the cluster); a bad setting in the environment
    ends the job with its one-line reason (exit 2)."""
    try:
        s = loader.load()
    except Failure as exc:
        stderr.print(f"[red]error:[/red] {escape(str(exc))}")
        raise SystemExit(exits.code_of(exc)) from exc
    state_url = args.state_url or s.state_url
    options = {
        "bootstrap_servers": args.bootstrap_servers or s.bootstrap_servers,
        "security_protocol": args.upstream_security_protocol or s.upstream_security_protocol,
        "sasl_mechanism": args.upstream_sasl_mechanism or s.upstream_sasl_mechanism,
        "parallelism": str(args.parallelism),
    }
    if args.upstream_sasl_username or s.upstream_sasl_username:
        options["sasl_username"] = args.upstream_sasl_username or s.upstream_sasl_username
    if args.upstream_ssl_cafile or s.upstream_ssl_cafile:
        options["ssl_cafile"] = args.upstream_ssl_cafile or s.upstream_ssl_cafile
    if s.upstream_sasl_password is not None:  # executors read it from their environment
        os.environ.setdefault(
            "SHAREPROXY_UPSTREAM_SASL_PASSWORD", s.upstream_sasl_password.get_secret_value()
        )
    return state_url, options


def proxy_retention() -> timedelta | None:
    """The retention the running proxy expires groups after (None: it keeps them), so that a
    job judges expiry as the proxy does; read after ``settings`` has vetted the environment."""
    ms = loader.load().share_group_retention_ms
    return None if ms is None else timedelta(milliseconds=ms)


# the session a driver that runs several jobs lends them (``lend_session``); None: each job
# starts its own and stops it
_lent: Any = None


def spark_session(app: str, master: str | None) -> Any:
    """A session with the data sources registered. Outside spark-submit the master defaults
    to local[*]; under it, spark-submit's choice stands unless --master is given. A session
    lent with ``lend_session`` is used as it is instead (its master and settings), and
    ``release`` leaves it running."""
    from pyspark.sql import SparkSession

    from shareproxy.batch.sources import SOURCES

    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and Path(java_home, "bin", "java").exists()) and not shutil.which("java"):
        raise BadInput(
            "the Spark jobs need Java 17: no java on PATH and no JAVA_HOME "
            "(Debian: apt-get install openjdk-17-jre-headless)"
        )

    if _lent is not None:
        return _lent
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app)
    if master is not None or not _under_spark_submit():
        builder = builder.master(master or "local[*]")
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    for source in SOURCES:
        spark.dataSource.register(source)
    return spark


def release(spark: Any) -> None:
    """The job is done with its session: stopped, unless it was lent."""
    if spark is not _lent:
        spark.stop()


@contextmanager
def lend_session(spark: Any) -> Iterator[Any]:
    """Run the jobs started meanwhile in this process in ``spark`` (from ``spark_session``),
    as a driver that runs several jobs does: starting a session takes seconds."""
    global _lent
    _lent = spark
    try:
        yield spark
    finally:
        _lent = None


def _under_spark_submit() -> bool:
    """spark-submit starts the Python driver with a gateway already running."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


@contextmanager
def step(text: str) -> Iterator[None]:
    """Progress on stderr: a spinner while the step runs, a tick when it is done."""
    with stderr.status(text):
        yield
    stderr.print(f"[green]✓[/green] {text}")


def jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):  # PySpark 4.0 gives binary columns as bytearray
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "value") and type(value).__module__.startswith("shareproxy"):
        return value.value  # enums
    return value


def write_output(path: Path | None, document: dict[str, Any], frames: dict[str, Any]) -> None:
    """JSON: the whole document. Parquet: one directory per named Spark DataFrame."""
    if path is None:
        return
    if path.suffix == ".parquet":
        for name, frame in frames.items():
            frame.write.mode("overwrite").parquet(str(path / name))
    else:
        path.write_text(json.dumps(jsonable(document), indent=2) + "\n")
    stderr.print(f"[green]✓[/green] written to {path}")


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A result table on stdout, complete: cells wrap on a terminal, never end in "…"."""
    t = Table(title=title)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*("" if v is None else str(jsonable(v)) for v in r))
    terminal.stdout().print(t)
