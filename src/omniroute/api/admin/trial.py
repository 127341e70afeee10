"""Trying the routing from the management API (OPS-3): send one prompt to any routable id, or test one
connection.

``POST /api/try`` runs a non-streaming chat request for ``model`` through the same resolution,
strategies, resilience ladder and attempt loop as ``/v1/chat/completions`` and records it like one
(usage row without an API key, decision under the returned ``request_id``); the answer, status and
decision come back together. ``POST /api/connections/{id}/test`` makes one attempt at the
connection's default model through that connection alone (the ladder still applies: a connection
whose provider breaker is open is reported as not attempted), stores the outcome as the connection's
``test_status``/``last_error`` and returns it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from omniroute.api.admin.core import Admin
from omniroute.errors import GatewayError
from omniroute.gateway import Gateway
from omniroute.routing.decision import Decision
from omniroute.routing.engine import Outcome
from omniroute.routing.resolve import resolve
from omniroute.values import ChatRequest

router = APIRouter()

MAX_PROMPT_CHARS = 20_000
TEST_PROMPT = "Reply with OK."
TEST_MAX_TOKENS = 8


class TryIn(BaseModel):
    """``POST /api/try``: a routable id (combo, ``auto…``, ``provider/model`` …) and a user prompt."""

    model: str = Field(min_length=1, max_length=256)
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    max_tokens: int | None = Field(default=None, ge=1, le=100_000)


class TryOut(BaseModel):
    """The outcome of one request: ``status`` as a client would have seen it, the answer text or the
    error (OpenAI error shape), who served it, latency (ms), token usage and the full decision."""

    request_id: str
    model: str
    status: int
    answer: str | None
    error: dict[str, Any] | None
    provider: str | None
    served_model: str | None
    connection: str | None
    latency_ms: float
    usage: dict[str, int] | None
    decision: dict[str, Any] | None


def _request(gw: Gateway, model: str, prompt: str, max_tokens: int | None) -> ChatRequest:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return ChatRequest(body=body, model=model, request_id=gw.new_request_id())


async def _run(gw: Gateway, req: ChatRequest, connection: str | None = None) -> TryOut:
    """Execute ``req`` (only through ``connection`` when given), record usage and return the outcome."""
    t0 = gw.clock.monotonic()
    decision = Decision(req.request_id, req.model)
    outcome: Outcome | None = None
    error: GatewayError | None = None
    try:
        if connection is None:
            result, _ = await gw.execute(req, decision)
        else:
            result = await _attempt_through(gw, req, decision, connection)
        assert isinstance(result, Outcome)  # non-streaming request
        outcome = result
    except GatewayError as err:
        error = err
    latency_ms = (gw.clock.monotonic() - t0) * 1000
    cand = outcome.candidate if outcome else None
    gw.record_usage(
        req,
        decision,
        status=error.status if error else 200,
        cand=cand,
        usage=outcome.usage if outcome else None,
        latency_ms=latency_ms,
        ttft_ms=None,
        error=error.message if error else None,
    )
    answer = None
    if outcome is not None:
        choices = outcome.response.get("choices") or [{}]
        answer = str((choices[0].get("message") or {}).get("content") or "")
    return TryOut(
        request_id=req.request_id,
        model=req.model,
        status=error.status if error else 200,
        answer=answer,
        error={"message": error.message, "type": error.type, "code": error.code, **error.extra}
        if error
        else None,
        provider=cand.provider.id if cand else None,
        served_model=cand.model.id if cand else None,
        connection=cand.connection.id if cand else None,
        latency_ms=round(latency_ms, 3),
        usage=outcome.usage.to_openai() if outcome and outcome.usage else None,
        decision=await gw.get_decision(req.request_id),
    )


async def _attempt_through(gw: Gateway, req: ChatRequest, decision: Decision, connection: str) -> Any:
    """One attempt (no retry, no fallback) at ``req.model`` through ``connection`` only."""
    plan = resolve(gw.registry, req.model)
    decision.route = plan.route
    try:
        candidates, _ = await gw.planner.candidates(plan, req, decision)
        mine = [c for c in candidates if c.connection.id == connection]
        if not mine:
            raise GatewayError(
                f"Connection '{connection}' cannot serve {req.model} now (inactive or unusable credential).",
                status=409,
                code="connection_unavailable",
            )
        return await gw.engine.run(req, mine, decision, max_attempts=1, per_target=0)
    finally:
        gw.remember(decision)


@router.post("/api/try", response_model=TryOut, tags=["routing"])
async def try_model(body: TryIn, gw: Admin) -> TryOut:
    """Send one prompt to ``model`` as a client would and return the answer with its decision."""
    return await _run(gw, _request(gw, body.model, body.prompt, body.max_tokens))


@router.post("/api/connections/{cid}/test", response_model=TryOut, tags=["connections"])
async def test_connection(cid: str, gw: Admin) -> TryOut:
    """One short request through connection ``cid`` at its default model; the result is stored as its
    ``test_status`` (``ok``/``failed``) and ``last_error``."""
    reg = gw.registry
    conn = reg.connections_by_id.get(cid)
    provider = reg.catalog.provider(conn.provider) if conn is not None else None
    model = None
    if conn is not None and provider is not None:  # the model auto routing would use (AUTO-2)
        model = reg.model_info(provider, conn.default_model) if conn.default_model else None
        model = model or (provider.models[0] if provider.models else None)
    if conn is None or provider is None or model is None:
        raise GatewayError(
            f"No usable connection '{cid}' (unknown, or its provider has no model).",
            status=404,
            code="not_found",
            param="id",
        )
    out = await _run(gw, _request(gw, f"{provider.id}/{model.id}", TEST_PROMPT, TEST_MAX_TOKENS), cid)
    assert gw.store is not None
    if await gw.store.get_connection(cid) is not None:  # simulated connections are not stored
        failed = out.error is not None
        await gw.store.update_connection_state(
            cid,
            test_status="failed" if failed else "ok",
            last_error=str(out.error["message"]) if out.error else None,
        )
    return out
