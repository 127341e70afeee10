"""Answering a token-count route (Anthropic ``count_tokens``, Gemini ``countTokens``) with the best
count available: the target upstream's own count endpoint, else a tokenizer, else the route's
estimate (:mod:`omniroute.wire.count_tokens` has the rules). The source goes out in the
``X-OmniRoute-Token-Count`` header.

The target is the first active connection of the first target of the model's plan (a provider/model,
a chain or a catalog id; combos and auto routes pick per request, so they are counted locally). A
failing upstream count is not an error for the client: the count falls back to the next source.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from omniroute.errors import GatewayError
from omniroute.gateway import Gateway
from omniroute.providers.upstream import AttemptTimeouts
from omniroute.routing.resolve import resolve
from omniroute.values import Candidate
from omniroute.wire.base import TokenCount
from omniroute.wire.count_tokens import (
    parse_upstream_count,
    tokenizer_count,
    upstream_count_request,
)

log = logging.getLogger("omniroute.api")

COUNT_TIMEOUT_S = 10.0
"""Longest wait, in seconds, for an upstream count or a tokenizer's first load before falling back."""


def _target(gw: Gateway, model: str) -> Candidate | None:
    try:
        plan = resolve(gw.registry, model)
    except GatewayError:
        return None
    for t in plan.targets:
        for conn in gw.registry.connections.get(t.provider.id, ()):
            if t.enabled and conn.is_active and t.connection_id in (None, conn.id):
                return Candidate(t.provider, conn, t.model)
    return None


async def _upstream(
    gw: Gateway, cand: Candidate, tc: TokenCount, client_format: str, beta: str | None
) -> int | None:
    assert tc.canonical is not None
    ureq = upstream_count_request(cand, tc.canonical, tc.native, client_format, beta)
    if ureq is None:
        return None
    t = gw.client.timeouts
    timeouts = AttemptTimeouts(t.connect_s, COUNT_TIMEOUT_S, COUNT_TIMEOUT_S, COUNT_TIMEOUT_S)
    try:
        resp, raw = await gw.client.fetch(ureq, provider=cand.provider.id, timeouts=timeouts)
    except GatewayError as err:
        log.info("%s: token count failed (%s); counting locally", cand.provider.id, err.message)
        return None
    if resp.status != 200:
        log.info("%s: token count answered HTTP %d; counting locally", cand.provider.id, resp.status)
        return None
    return parse_upstream_count(cand.provider.format, raw)


async def count_tokens(
    gw: Gateway, tc: TokenCount, client_format: str, headers: Mapping[str, str]
) -> tuple[dict[str, Any], str]:
    """``(the route's answer body, its source: upstream | tokenizer | estimate)`` for ``tc``."""
    if tc.canonical is None or not tc.count_key:
        return tc.body, "estimate"
    cand = _target(gw, tc.model)
    if cand is not None:
        n = await _upstream(gw, cand, tc, client_format, headers.get("anthropic-beta"))
        if n is not None:
            return {**tc.body, tc.count_key: n}, "upstream"
    model = cand.model.id if cand is not None else tc.model
    try:
        async with asyncio.timeout(COUNT_TIMEOUT_S):
            n = await asyncio.to_thread(tokenizer_count, tc.canonical, model)
    except TimeoutError:
        n = None
    if n is not None:
        return {**tc.body, tc.count_key: n}, "tokenizer"
    return tc.body, "estimate"
