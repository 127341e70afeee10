"""``POST /v1/embeddings`` (API-5): routed like chat (same resolution, same ladder) to OpenAI-format
providers that serve embeddings, in plain priority order, through the engine's attempt loop (the same
retry budget, attempt cap, deadline, in-flight counts and probe slots as chat; the call itself is
:class:`~omniroute.wire.openai.upstream.EmbeddingsCall`). Usage is recorded (OBS-1)."""

from __future__ import annotations

from typing import Any

import orjson

from omniroute.api.asgi import (
    Receive,
    Scope,
    Send,
    encode_headers,
    header_map,
    parse_json_object,
    read_body,
    send_bytes,
)
from omniroute.api.chat import chat_request, routing_headers, send_error
from omniroute.errors import GatewayError, InvalidRequest
from omniroute.gateway import Gateway
from omniroute.routing.decision import Decision
from omniroute.routing.engine import Outcome
from omniroute.routing.permissions import allowed_candidates
from omniroute.routing.resolve import resolve
from omniroute.values import Usage
from omniroute.wire.openai.outbound import openai_error
from omniroute.wire.openai.upstream import EMBEDDINGS

ENCODING_FORMATS = ("float", "base64")
MAX_INPUTS = 2048
"""Most inputs in one embeddings request (OpenAI API reference: "2048 dimensions or less")."""


def _article(word: str) -> str:
    """``an`` before a vowel (``an auto route``), else ``a`` (``a combo route``)."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _input_problem(inp: Any) -> str | None:
    """Why ``input`` is not a non-empty string, array of strings, array of token ids or array of
    token-id arrays (OpenAI embeddings reference); ``None`` when it is fine."""
    if isinstance(inp, str):
        return None if inp else "must not be an empty string"
    if not isinstance(inp, list) or not inp:
        return "must be a string or a non-empty array of strings, token ids or token-id arrays"
    if len(inp) > MAX_INPUTS:
        return f"may hold at most {MAX_INPUTS} items; got {len(inp)}"
    first = inp[0]
    if isinstance(first, str):
        ok = all(isinstance(x, str) and x for x in inp)
    elif _is_int(first):
        ok = all(_is_int(x) for x in inp)
    else:
        ok = all(isinstance(x, list) and x and all(_is_int(t) for t in x) for x in inp)
    return None if ok else "must be one kind: non-empty strings, token ids or non-empty token-id arrays"


def _validate(body: dict[str, Any]) -> None:
    """``model``, ``input``, ``dimensions`` (≥ 1), ``encoding_format`` (float | base64), ``user``;
    raises :class:`InvalidRequest` (400) naming the field (API-6)."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise InvalidRequest("'model' must be a non-empty string.", param="model")
    problem = _input_problem(body.get("input"))
    if problem is not None:
        raise InvalidRequest(f"'input' {problem}.", param="input")
    dims = body.get("dimensions")
    if dims is not None and (not _is_int(dims) or dims < 1):
        raise InvalidRequest(f"'dimensions' must be an integer >= 1; got {dims!r}.", param="dimensions")
    fmt = body.get("encoding_format")
    if fmt is not None and fmt not in ENCODING_FORMATS:
        raise InvalidRequest(
            f"'encoding_format' must be 'float' or 'base64'; got {fmt!r}.", param="encoding_format"
        )
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidRequest(f"'user' must be a string; got {user!r}.", param="user")


async def embeddings(gw: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    """Forward an embeddings request to the first healthy candidate; fall back on failure (the engine's
    rules: transient errors retried and failed over, a non-retryable one returned as is)."""
    t0 = gw.clock.monotonic()
    headers = header_map(scope)
    req_id = gw.request_id_for(headers, claim=True)
    try:
        key = gw.authenticate(headers)
        body = parse_json_object(
            await read_body(
                receive,
                gw.max_body_bytes,
                headers.get("content-length"),
                gw.body_deadlines,
                headers.get("content-encoding"),
            ),
            headers.get("content-type"),
        )
        _validate(body)
        req = chat_request(body, headers, client_format="openai", request_id=req_id, api_key=key)
        gw.check_key_allows(key, req.model)
    except GatewayError as err:
        err.headers.setdefault("x-request-id", req_id)
        await send_error(send, openai_error, err)
        return
    decision = Decision(request_id=req_id, requested_model=req.model, strategy="priority", ts=gw.clock.time())
    try:
        plan = resolve(gw.registry, req.model)
        decision.route = plan.route
        if not plan.targets:
            raise InvalidRequest(
                f"'{req.model}' is {_article(plan.kind)} {plan.kind} route; embeddings go to a "
                "provider/model id or a bare catalog model id that serves embeddings.",
                param="model",
            )
        cands = [c for c in gw.planner.expand(plan.targets, decision) if c.provider.format == "openai"]
        cands = allowed_candidates(gw.allowed_models_for(req.api_key_id), cands, decision, req.model)
        req.reservation = await gw.admit(req, cands)  # rate limits (429), budget (402)
        out = await gw.engine.run(req, cands, decision, call=EMBEDDINGS)
        assert isinstance(out, Outcome), "embeddings are never streamed"
        gw.remember(decision)
        cand = out.candidate
        usage = Usage(prompt_tokens=out.usage.prompt_tokens if out.usage is not None else 0)
        total = (gw.clock.monotonic() - t0) * 1000
        gw.record_usage(req, decision, status=200, cand=cand, usage=usage, latency_ms=total, ttft_ms=None)
        hdr = routing_headers(req, decision, total - out.upstream_ms, cand)
        await send_bytes(send, 200, orjson.dumps(out.response), encode_headers(hdr))
    except GatewayError as err:
        gw.remember(decision)
        elapsed_ms = (gw.clock.monotonic() - t0) * 1000
        gw.record_usage(
            req,
            decision,
            status=err.status,
            cand=None,
            usage=None,
            latency_ms=elapsed_ms,
            ttft_ms=None,
            error=err.message,
        )
        await send_error(send, openai_error, err, req, decision, elapsed_ms)
