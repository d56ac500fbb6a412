"""A node starts in about a second of CPU because what serves Kafka requests imports only what
it uses: the admin app (FastAPI and its models), the store (SQLAlchemy, Alembic, asyncpg) and
the CLI's libraries load where they are used, never with the Kafka path. Each module is imported
in a fresh interpreter, since this one has everything loaded already."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# the Kafka path: listener, dispatch, handlers, the runtime's use cases, the core and the wire
HOT = [
    "shareproxy.kafka.listener",
    "shareproxy.node.wiring",
    "shareproxy.runtime.consuming.consumers",
    "shareproxy.protocol.codec",
    "shareproxy.core.share_partition",
]
HEAVY = [
    "fastapi",
    "starlette",
    "uvicorn",
    "shareproxy.admin",
    "sqlalchemy",
    "alembic",
    "asyncpg",
    "aiosqlite",
    "shareproxy.persistence",
    "typer",
    "rich",
    "httpx",
]


def _imported_by(module: str) -> set[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("module", HOT)
def test_the_kafka_path_imports_no_admin_app_store_or_cli(module: str):
    loaded = _imported_by(module)
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert not heavy, f"importing {module} loads {heavy[:8]}"


def test_no_kio_schema_is_imported_before_a_request_names_it():
    """kio's schema modules load when a request first names an API version (tens of
    milliseconds each), not at import: ApiVersions' table comes from kio's index."""
    loaded = _imported_by("shareproxy.kafka.dispatch")
    schemas = {m.split(".")[2] for m in loaded if m.startswith("kio.schema.") and m.count(".") > 2}
    relayed_only = {"join_group", "sync_group", "offset_commit", "end_txn", "init_producer_id"}
    assert not schemas & relayed_only, sorted(schemas & relayed_only)


@pytest.mark.parametrize("module", ["shareproxy.node.proxy", "shareproxy.cli.app"])
def test_a_node_imports_alembic_only_to_migrate_and_httpx_only_to_call_a_proxy(module: str):
    """A start checks the store's schema revision with one query; Alembic (a fifth of a start's
    CPU with its scripts read) loads only when the schema must be migrated. The CLI's client of
    the admin API (httpx) loads only in the commands that call one, never in ``serve``."""
    loaded = _imported_by(module)
    unwanted = [m for m in loaded if m.split(".")[0] in {"alembic", "httpx"}]
    assert not unwanted, f"importing {module} loads {sorted(unwanted)[:8]}"


# the server side: what `serve`, `migrate`, the jobs and the demo load, and no command that only
# calls a running proxy's admin API needs
SERVER_SIDE = [
    "fastapi",
    "starlette",
    "uvicorn",
    "uvloop",
    "sqlalchemy",
    "alembic",
    "asyncpg",
    "aiosqlite",
    "aiokafka",
    "kio",
    "pyspark",
    "pydantic_settings",
    "shareproxy.admin",
    "shareproxy.batch",
    "shareproxy.demo",
    "shareproxy.kafka",
    "shareproxy.node",
    "shareproxy.persistence",
    "shareproxy.runtime",
    "shareproxy.settings",
    "shareproxy.upstream",
]
NOWHERE = "http://127.0.0.1:9"  # refused: the command runs to its call and fails there
REST_COMMANDS = [
    ["groups", "list"],
    ["groups", "list", "--help"],
    ["groups", "describe", "g"],
    ["groups", "records", "g", "t:0"],
    ["users", "list"],
    ["acls", "list"],
    ["version"],
]


@pytest.mark.parametrize("argv", REST_COMMANDS, ids=" ".join)
def test_a_command_that_calls_the_admin_api_loads_no_server(argv: list[str]):
    """Such a command answers in a fraction of a second: it parses its arguments and calls the
    API without importing the settings model, the store, the node or the Kafka path."""
    code = (
        "import json, sys\n"
        "from shareproxy.cli.app import app\n"
        "try:\n"
        "    app(sys.argv[1:], standalone_mode=False)\n"
        "except BaseException:\n"
        "    pass\n"
        "print('\\n' + json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "SHAREPROXY_ADMIN_URL": NOWHERE},
    )
    loaded = json.loads(done.stdout.splitlines()[-1])
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in SERVER_SIDE))
    assert not heavy, f"`shareproxy {' '.join(argv)}` loads {heavy[:8]}"
