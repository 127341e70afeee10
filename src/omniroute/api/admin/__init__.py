"""The management API (FastAPI, OpenAPI at ``/openapi.json``), health (OBS-4) and metrics (OBS-3).

``/api/*`` requires ``Authorization: Bearer <server.admin_key>`` (or a signed-in console session with
its CSRF token); with no admin key configured it answers only on loopback (API-8). The browsable
``/docs`` page is added with the console (:func:`omniroute.dashboard.install`). Errors use the OpenAI
error shape (API-6), including validation errors, which name the field.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from omniroute.api.admin import auto, auto_scores, combos, connections, core, resilience, trial, usage
from omniroute.api.admin.openapi_doc import document_errors
from omniroute.core.fields import field_errors
from omniroute.errors import GatewayError, InvalidRequest
from omniroute.gateway import Gateway
from omniroute.store.errors import StoreConflict, StoreNotFound

log = logging.getLogger("omniroute.api")


def _error(status: int, message: str, kind: str, param: str | None, code: str | None = None) -> JSONResponse:
    """The OpenAI error shape (API-6) used by every management-API error."""
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": code, "param": param}}, status_code=status
    )


def _is_overflow(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, OverflowError) or (isinstance(exc, TypeError) and "64-bit" in str(exc)):
            return True
        exc = exc.__cause__ or getattr(exc, "orig", None)
    return False


def build_admin_app(gw: Gateway) -> FastAPI:
    """The FastAPI app for everything outside the ``/v1`` hot path."""
    app = FastAPI(
        title="OmniRoute management API", version="0.1.0", docs_url=None, redoc_url=None, openapi_url=None
    )

    @app.exception_handler(GatewayError)
    async def _gateway_error(request: Request, exc: GatewayError) -> JSONResponse:
        kind = exc.type if exc.status >= 500 or exc.type != "server_error" else "invalid_request_error"
        return JSONResponse(
            {
                "error": {"message": exc.message, "type": kind, "code": exc.code, "param": exc.param},
                **exc.extra,
            },
            status_code=exc.status,
            headers=exc.headers,
        )

    @app.exception_handler(400)
    async def _bad_body(request: Request, exc: Exception) -> JSONResponse:
        """FastAPI turns a failing body read into a 400; a body over the cap is a 413 (OPS-2)."""
        cause = exc.__cause__
        if isinstance(cause, GatewayError):
            return await _gateway_error(request, cause)
        detail = getattr(exc, "detail", None)
        return _error(400, str(detail or "Bad request."), "invalid_request_error", "body")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        """Out-of-range integers (SQLite/orjson overflow) are the client's 400; anything else is a
        logged 500 in the JSON error shape, never a plain-text page."""
        if _is_overflow(exc):
            return _error(
                400,
                "A number in the request is out of range (integers must fit in 64 bits).",
                "invalid_request_error",
                "body",
            )
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return _error(500, "Internal gateway error; see the gateway log.", "server_error", None)

    @app.exception_handler(StoreConflict)
    async def _conflict(request: Request, exc: StoreConflict) -> JSONResponse:
        return _error(409, str(exc), "invalid_request_error", "name", "conflict")

    @app.exception_handler(StoreNotFound)
    async def _missing(request: Request, exc: StoreNotFound) -> JSONResponse:
        return _error(404, str(exc), "invalid_request_error", None, "not_found")

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        """The first field error, named as the config loader names it (``targets[0].weight``)."""
        first = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid request"}
        skip = 1 if tuple(first["loc"])[:1] in (("body",), ("query",), ("path",)) else 0
        param, message = field_errors([first], skip=skip)[0]
        err = InvalidRequest(f"{param or 'body'}: {message}", param=param or "body")
        return _error(400, err.message, err.type, err.param, err.code)

    @app.exception_handler(404)
    async def _not_found(request: Request, exc: Exception) -> JSONResponse:
        detail = getattr(exc, "detail", None)
        path = request.url.path
        msg = detail if isinstance(detail, str) and detail != "Not Found" else f"No route {path[:200]}"
        if path.startswith("/v1beta/"):  # Gemini clients get Gemini's error shape (API-6)
            return JSONResponse(
                {"error": {"code": 404, "message": msg, "status": "NOT_FOUND"}}, status_code=404
            )
        if path.startswith("/v1/messages"):  # Anthropic clients get Anthropic's
            return JSONResponse(
                {"type": "error", "error": {"type": "not_found_error", "message": msg}}, status_code=404
            )
        return _error(404, msg, "invalid_request_error", None, "not_found")

    @app.exception_handler(405)
    async def _not_allowed(request: Request, exc: Exception) -> JSONResponse:
        msg = f"Method {request.method} not allowed on {request.url.path}"
        return _error(405, msg, "invalid_request_error", None, "method_not_allowed")

    app.state.gateway = gw
    for module in (core, usage, trial, connections, resilience, combos, auto, auto_scores):
        app.include_router(module.router)
    _public_descriptions(app)

    @app.get("/openapi.json", include_in_schema=False)
    async def _openapi(gw: core.Admin) -> JSONResponse:
        """The OpenAPI document, behind the management API's authentication (it maps the API)."""
        return JSONResponse(app.openapi())

    return app


_REQUIREMENT_IDS = re.compile(
    r" ?\((?:SPEC )?(?:API|PROV|RES|RESIL|COMBO|AUTO|OBS|OPS|STORE|BEYOND|PERF|SEC|MONEY|FID)-\d+[a-z]?"
    r"(?:[,;/ ]+(?:API|PROV|RES|RESIL|COMBO|AUTO|OBS|OPS|STORE|BEYOND|PERF|SEC|MONEY|FID)-\d+[a-z]?)*\)"
)


def _public_descriptions(app: FastAPI) -> None:
    """The OpenAPI document is read by operators: endpoint docstrings keep their requirement ids for
    the code's readers, the published descriptions leave them out."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            public = orjson.loads(_REQUIREMENT_IDS.sub("", orjson.dumps(schema).decode()))
            app.openapi_schema = document_errors(public)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
