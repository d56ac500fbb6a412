"""The REST reference, from the admin app's own OpenAPI document: the app is built as ``serve``
builds it, on stand-ins for the runtime (describing the routes calls none of them), and no
server is started."""

from __future__ import annotations

import json
import re
from typing import Any

from shareproxy.admin import errors
from shareproxy.admin.app import create_app
from shareproxy.admin.health import ReadinessProbes
from shareproxy_docs.markdown import cell, code, generated_from, text

SOURCES = "the admin API's OpenAPI document (`shareproxy/admin/`)"
METHODS = ("get", "put", "post", "patch", "delete")
UNTAGGED = "Other routes"
_BOUNDS = (
    ("minimum", "≥"),
    ("exclusiveMinimum", ">"),
    ("maximum", "≤"),
    ("exclusiveMaximum", "<"),
    ("minLength", "length ≥"),
    ("maxLength", "length ≤"),
    ("minItems", "items ≥"),
    ("maxItems", "items ≤"),
)


class _Unused:
    """Stands for every collaborator of the app: building the routes only keeps references
    to what they will call (attributes of attributes included); describing them calls nothing."""

    def __getattr__(self, name: str) -> _Unused:
        return self


async def _never() -> None:
    return None


def app() -> Any:
    unused: Any = _Unused()
    probes = ReadinessProbes(store=_never, upstream=_never, listener=lambda: True, owned=dict)
    return create_app(probes, unused, unused, unused, unused, unused)


def operation_anchor(method: str, path: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "-", f"{method} {path}".lower()).strip("-")


def schema_anchor(name: str) -> str:
    return "schema-" + name.lower()


def page() -> str:
    admin = app()
    document = admin.openapi()
    lines = [
        generated_from(SOURCES),
        "The admin API listens on `--admin-listen` "
        "([`admin_listen`](configuration.md#admin_listen)). "
        f"A running node serves this document as OpenAPI at {code(admin.openapi_url)} and as "
        f"pages to try calls from at {code(admin.docs_url)}. With security on, a call "
        "authenticates with a bearer token (`POST /v1/tokens`) or HTTP Basic, and each route "
        "checks the ACL its operation needs.",
        "",
        *_errors(),
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in document["paths"].items():
        for method in METHODS:
            operation = item.get(method)
            if operation is not None:
                tag = (operation.get("tags") or [UNTAGGED])[0]
                by_tag.setdefault(tag, []).append((method, path, operation))
    for tag, operations in sorted(by_tag.items(), key=lambda kv: kv[0] == UNTAGGED):
        lines += [f"## {text(tag[:1].upper() + tag[1:])}", ""]
        for method, path, operation in operations:
            lines += _operation(method, path, operation)
    lines += ["## Schemas", ""]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        lines += _schema(name, schema)
    return "\n".join(lines)


def _errors() -> list[str]:
    example = json.dumps(errors.body("GROUP_ID_NOT_FOUND", "…"), ensure_ascii=False)
    lines = [
        "## Errors",
        "",
        f"A refused call answers with the Kafka error the same refusal gets on the Kafka "
        f"listener, by name, and a message: {code(example)}. The HTTP status follows the error:",
        "",
        "| error_code | status |",
        "|---|---|",
    ]
    lines += [
        f"| `{kafka_error.name}` | {status} |" for kafka_error, status in errors.STATUS.items()
    ]
    lines += [
        "",
        f"Any other refusal is {errors.REFUSED}: the request met a rule. A call without valid "
        "credentials is 401, one an ACL refuses 403. A request that does not fit the schemas "
        "below is 422 `INVALID_REQUEST`, its message naming each field, and a body that is not "
        "JSON 400 `MALFORMED_JSON`. Every error has the body [Error](#schema-error); each "
        "operation lists its 422 and, as `default`, every other error status.",
        "",
    ]
    return lines


def _operation(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}` {{#{operation_anchor(method, path)}}}", ""]
    summary = operation.get("summary")
    description = operation.get("description")
    if summary:
        lines += [f"**{text(summary)}**" + (f": {text(description)}" if description else ""), ""]
    elif description:
        lines += [text(description), ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in parameters:
            schema = p.get("schema", {})
            about = p.get("description") or schema.get("description") or ""
            if "default" in schema:
                about = f"{about} (default {json.dumps(schema['default'])})".strip()
            lines.append(
                f"| `{p['name']}` | {p['in']} | {_type(schema)} | "
                f"{'yes' if p.get('required') else 'no'} | {cell(about)} |"
            )
        lines.append("")
    body = operation.get("requestBody")
    if body is not None:
        media = [f"{_type(c.get('schema', {}))} ({code(m)})" for m, c in body["content"].items()]
        required = "required" if body.get("required") else "optional"
        lines += [f"Request body, {required}: {', '.join(media)}.", ""]
    lines += ["| status | description | body |", "|---|---|---|"]
    for status, response in operation.get("responses", {}).items():
        content = response.get("content", {})
        kinds = ", ".join(_type(c.get("schema", {})) for c in content.values()) or "none"
        lines.append(f"| {status} | {cell(response.get('description', ''))} | {kinds} |")
    return [*lines, ""]


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name} {{#{schema_anchor(name)}}}", ""]
    if schema.get("description"):
        lines += [text(schema["description"]), ""]
    properties = schema.get("properties")
    if not properties:
        return [*lines, f"Type: {_type(schema)}.", ""]
    required = set(schema.get("required", ()))
    lines += ["| field | type | required | default | description |", "|---|---|---|---|---|"]
    for field, spec in properties.items():
        default = code(json.dumps(spec["default"])) if "default" in spec else ""
        lines.append(
            f"| `{field}` | {_type(spec)} | {'yes' if field in required else 'no'} | "
            f"{default} | {cell(spec.get('description', ''))} |"
        )
    return [*lines, ""]


def _type(schema: dict[str, Any]) -> str:
    """A JSON schema as a short phrase, with links to the named schemas it uses."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{schema_anchor(name)})"
    for combined in ("anyOf", "oneOf", "allOf"):
        if combined in schema:
            return " or ".join(_type(s) for s in schema[combined])
    if "enum" in schema:
        return "one of " + ", ".join(code(json.dumps(v)) for v in schema["enum"])
    if "const" in schema:
        return code(json.dumps(schema["const"]))
    kind = schema.get("type", "any")
    if kind == "array":
        phrase = f"array of {_type(schema.get('items', {}))}"
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        phrase = f"object of {_type(schema['additionalProperties'])}"
    else:
        phrase = kind if isinstance(kind, str) else " or ".join(kind)
    if "format" in schema:
        phrase += f" ({schema['format']})"
    bounds = [f"{sign} {schema[key]:g}" for key, sign in _BOUNDS if key in schema]
    return f"{phrase}, {', '.join(bounds)}" if bounds else phrase
