"""``shareproxy reconcile`` and ``shareproxy report``: the Spark job files in ``spark/`` run
in-process on ``local[*]`` (or ``--master``); their own parser owns the options, so the same
files take the same options under ``spark-submit``."""

from __future__ import annotations

import runpy
from pathlib import Path

import typer

import shareproxy
from shareproxy.core.failures import Failure
from shareproxy.host import exits


def jobs_dir() -> Path:
    """Packaged copy in a wheel, else the repository's top-level ``spark/``."""
    package = Path(shareproxy.__file__).resolve().parent
    for candidate in (package / "_spark", package.parent / "spark"):
        if (candidate / "reconcile.py").is_file():
            return candidate
    raise FileNotFoundError("shareproxy's Spark jobs are missing from this install")


def run_job(name: str, args: list[str]) -> int:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        typer.echo(
            "the Spark jobs need PySpark: pip install 'shareproxy[spark]' (and Java 17)", err=True
        )
        return exits.USAGE
    job = runpy.run_path(str(jobs_dir() / f"{name}.py"), run_name=f"shareproxy_{name}")
    try:
        return int(job["main"](args))
    except SystemExit as exc:  # argparse: --help (0) or bad arguments (2)
        return int(exc.code or 0)
    except Failure as exc:  # e.g. no Java: what to install
        typer.echo(f"error: {exc}", err=True)
        return exits.code_of(exc)
    except Exception as exc:  # the store or the cluster could not be read: say so, briefly
        first = next((line for line in str(exc).splitlines() if line.strip()), repr(exc))
        typer.echo(f"{name} failed: {type(exc).__name__}: {first[:500]}", err=True)
        return exits.UNAVAILABLE


PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def register(app: typer.Typer) -> None:
    @app.command(context_settings=PASS_THROUGH, add_help_option=False)
    def reconcile(ctx: typer.Context) -> None:
        """Find (and with --apply repair) drift between share-group state and the source
        topics; exit 1 when drift was found. --help lists the job's options."""
        raise typer.Exit(run_job("reconcile", list(ctx.args)))

    @app.command(context_settings=PASS_THROUGH, add_help_option=False)
    def report(ctx: typer.Context) -> None:
        """Lag, redelivery and archive rates, and the poison list read from the source topics.
        --help lists the job's options."""
        raise typer.Exit(run_job("report", list(ctx.args)))
