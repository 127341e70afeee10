"""The published OpenAPI document lists the errors each route really answers.

FastAPI adds a ``422`` to every route with a body or parameters, but validation errors are answered
as ``400`` naming the field (:func:`omniroute.api.admin.build_admin_app`), and it lists none of the
gateway's own errors. :func:`document_errors` rewrites each operation's ``responses`` from what the
route does: ``400`` for a body or parameters, ``401``/``403`` behind the admin key (or a client key
on ``/v1``), ``404`` for a path parameter, ``409`` where a name can be taken, ``413`` for a body
over ``server.max_body_mb``; all in the OpenAI error shape (``ErrorBody``).
"""

from __future__ import annotations

from typing import Any, Final

ERROR_SCHEMA: Final[dict[str, Any]] = {
    "title": "ErrorBody",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "code": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "param": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
        }
    },
}
DESCRIPTIONS: Final = {
    400: "Invalid request: the message names the field",
    401: "Missing or wrong credentials",
    403: "Not allowed from this client, Host or Origin",
    404: "No such object",
    409: "The name or state conflicts with an existing one",
    413: "Request body over server.max_body_mb",
}
#: POST routes where a name can already be taken or the state forbids the change
CONFLICT_PREFIXES: Final = ("/api/combos", "/api/keys", "/api/trial")
PUBLIC_PATHS: Final = frozenset({"/health", "/health/ready"})


def error_codes(path: str, method: str, op: dict[str, Any]) -> list[int]:
    """The error statuses of one operation (see the module docstring for the rules)."""
    codes: set[int] = set()
    params = op.get("parameters") or []
    if op.get("requestBody") or params:
        codes.add(400)
    if op.get("requestBody"):
        codes.add(413)
    if any(p.get("in") == "path" for p in params):
        codes.add(404)
    if path.startswith("/api/") or path == "/metrics":
        codes.update((401, 403))
    elif path.startswith("/v1/"):
        codes.add(401)
    if method == "post" and path.startswith(CONFLICT_PREFIXES):
        codes.add(409)
    if path in PUBLIC_PATHS:
        codes.clear()
    return sorted(codes)


def document_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every operation's ``422`` removed and its real error responses listed."""
    schema.setdefault("components", {}).setdefault("schemas", {})["ErrorBody"] = ERROR_SCHEMA
    ref = {"$ref": "#/components/schemas/ErrorBody"}
    for path, item in (schema.get("paths") or {}).items():
        for method, op in item.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            responses = op["responses"]
            responses.pop("422", None)
            for code in error_codes(path, method, op):
                responses.setdefault(
                    str(code),
                    {"description": DESCRIPTIONS[code], "content": {"application/json": {"schema": ref}}},
                )
    for unused in ("HTTPValidationError", "ValidationError"):
        schema["components"]["schemas"].pop(unused, None)
    return schema
