"""The admin API's OpenAPI document says what its errors are: every error is answered with the
``Error`` body, so each operation's 422 and its other error statuses (``default``) name that
schema, and FastAPI's own validation-error schema, a body the app never sends, is not listed."""

from __future__ import annotations

from tests.support.admin_app import Directory, Grants, Places, admin_app, admin_nodes


def _document() -> dict:
    return admin_app(Places(), Grants(), Directory()).openapi()


def test_every_operation_names_the_error_body_for_its_errors():
    document = _document()
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    operations = [op for item in document["paths"].values() for op in item.values()]
    assert len(operations) > 20
    for operation in operations:
        responses = operation["responses"]
        assert responses["default"]["content"] == error, operation["operationId"]
        if "422" in responses:
            assert responses["422"]["content"] == error, operation["operationId"]
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    assert _document() == document  # made once, the same every time


async def test_the_errors_sent_are_the_documented_body():
    schema = _document()["components"]["schemas"]["Error"]
    assert set(schema["required"]) == set(schema["properties"]) == {"error_code", "message"}
    async with admin_nodes() as n:
        invalid = await n.call("GET", "/v1/share-groups", params={"state": "Stabel"})
        denied = await n.call("GET", "/v1/share-groups/not-granted")
        route = await n.call("GET", "/v1/no-such-route")
    for answer, status, code in (
        (invalid, 422, "INVALID_REQUEST"),
        (denied, 403, "GROUP_AUTHORIZATION_FAILED"),
        (route, 404, "NOT_FOUND"),
    ):
        assert answer.status_code == status, answer.text
        body = answer.json()
        assert set(body) == set(schema["properties"]), body
        assert body["error_code"] == code and isinstance(body["message"], str), body
