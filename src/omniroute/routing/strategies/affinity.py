"""Strategies that remember where a request belongs (COMBO-3, COMBO-4): ``lkgp``,
``cache-optimized`` and ``context-relay``, plus the prompt-cache affinity stage every combo passes.

* ``lkgp``: the last known good target of this combo first (record ``combo:<name>:lkgp`` =
  ``{provider, connection, model}``, written on every success), matched by provider + connection,
  else provider + model, else provider; then definition order. No record → definition order.
* ``cache-optimized``: rendezvous hash of the prompt-cache key over connections (one target per
  connection): score = first 128 bits of SHA-256(key ∖0 ``provider/model@connection``), highest
  first; the key is ``prompt_cache_key`` (body or ``metadata``) else a hash of the system prompt and
  the first user turn, so one conversation keeps hitting the account holding its cached prefix.
* ``context-relay``: definition order; with a session (``X-Session-Id`` / ``X-OmniRoute-Session``)
  whose last serving model differs from the model expected to serve now, a handoff system message
  summarising the conversation is injected for the new model; the serving model is stored per
  session on success (reference §5.5; the summary is extractive and local, no extra upstream call).
* :func:`apply_cache_affinity` (COMBO-4 ``promptCacheAffinityEnabled``): with an explicit cache key
  or a long shared prefix, accounts of the same model are reordered by the same rendezvous hash;
  the first target of strategies that protect it is never displaced.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from omniroute.routing.strategies.base import ComboTarget, Ordering, StrategyContext
from omniroute.values import Candidate, ChatRequest

__all__ = [
    "AFFINITY_MIN_PREFIX_CHARS",
    "HANDOFF_MARKER",
    "CacheOptimized",
    "ContextRelay",
    "Lkgp",
    "apply_cache_affinity",
    "cache_key",
    "lkgp_record_key",
    "rendezvous_score",
]

MAX_CACHE_KEY_CHARS = 4096
AFFINITY_MIN_PREFIX_CHARS = 4096  # ≈ 1024 tokens: below that upstream prompt caches do not engage
HANDOFF_MARKER = "[OmniRoute context handoff]"
_EXCERPT_CHARS = 280


def lkgp_record_key(combo: str) -> str:
    """The RoutingState key of a combo's LKGP record (JSON ``{provider, connection, model}``)."""
    return f"combo:{combo}:lkgp"


class Lkgp:
    """``lkgp``: last known good target first (see module docstring)."""

    name = "lkgp"
    expands_connections = False
    protects_first = True

    async def order(self, ctx: StrategyContext) -> Ordering:
        ts = list(ctx.targets)
        rec = await ctx.state.get_json("lkgp")
        first = _match_lkgp(ts, rec) if isinstance(rec, dict) else None

        async def on_success(target: ComboTarget, cand: Candidate) -> None:
            await ctx.state.set_json(
                "lkgp",
                {"provider": cand.provider.id, "connection": cand.connection.id, "model": cand.model.id},
            )

        if first is None:
            return Ordering(ts, "no last-known-good record: definition order", on_success)
        ordered = [first, *(t for t in ts if t is not first)]
        return Ordering(ordered, f"last known good: {first.key}", on_success)


def _match_lkgp(ts: Sequence[ComboTarget], rec: Mapping[str, Any]) -> ComboTarget | None:
    provider, conn, model = rec.get("provider"), rec.get("connection"), rec.get("model")
    same_provider = [t for t in ts if t.provider.id == provider]
    for t in same_provider:
        if any(c.id == conn for c in t.connections) and (model is None or t.model.id == model):
            return t
    for t in same_provider:
        if t.model.id == model:
            return t
    return same_provider[0] if same_provider else None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") in ("text", None)
        )
    return "" if content is None else str(content)


def _prefix(body: Mapping[str, Any]) -> str:
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        return ""
    system = [
        _text(m.get("content"))
        for m in msgs
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    ]
    first_user = next(
        (_text(m.get("content")) for m in msgs if isinstance(m, dict) and m.get("role") == "user"), ""
    )
    if not system and not first_user:
        return ""
    return orjson.dumps([system, first_user]).decode()


def cache_key(req: ChatRequest, *, explicit_only: bool = False) -> str | None:
    """The prompt-cache key of a request: ``prompt_cache_key`` (body or ``metadata``, ≤ 4096 chars),
    else SHA-256 of the system prompt + first user turn (``None`` with ``explicit_only``, or when the
    request has no messages)."""
    body = req.body
    meta = body.get("metadata")
    explicit = body.get("prompt_cache_key") or (
        meta.get("prompt_cache_key") if isinstance(meta, dict) else None
    )
    if isinstance(explicit, str) and explicit:
        return "k:" + explicit[:MAX_CACHE_KEY_CHARS]
    if explicit_only:
        return None
    prefix = _prefix(body)
    return "p:" + hashlib.sha256(prefix.encode()).hexdigest() if prefix else None


def rendezvous_score(key: str, identity: str) -> int:
    """Highest-random-weight score of ``identity`` for ``key`` (first 128 bits of SHA-256)."""
    return int.from_bytes(hashlib.sha256(f"{key}\0{identity}".encode()).digest()[:16], "big")


def _identity(t: ComboTarget) -> str:
    return f"{t.model_str}@{t.connections[0].id}" if t.connections else t.model_str


class CacheOptimized:
    """``cache-optimized``: rendezvous hash of the cache key over connections."""

    name = "cache-optimized"
    expands_connections = True
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        key = cache_key(ctx.request)
        ts = list(ctx.targets)
        if key is None:
            return Ordering(ts, "no prompt-cache key: definition order")
        ts.sort(key=lambda t: (-rendezvous_score(key, _identity(t)), _identity(t), t.index))
        source = "prompt_cache_key" if key.startswith("k:") else "prefix hash"
        return Ordering(ts, f"rendezvous on {source}: {_identity(ts[0])}" if ts else "no targets")


def apply_cache_affinity(
    targets: list[ComboTarget], req: ChatRequest, *, protect_first: bool
) -> tuple[list[ComboTarget], bool]:
    """COMBO-4 prompt-cache affinity: reorder the accounts of each model by rendezvous hash so a
    cache key keeps landing on one account. Applies only with an explicit ``prompt_cache_key`` or a
    shared prefix of at least :data:`AFFINITY_MIN_PREFIX_CHARS`. Pinned targets of one model swap
    places among themselves; a target with several connections reorders them. With
    ``protect_first`` the first target keeps its place (its accounts may still be reordered).
    Returns the targets and whether anything moved."""
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(targets):
        if t.pinned and (i > 0 or not protect_first):
            groups.setdefault(t.model_str, []).append(i)
    multi = [slots for slots in groups.values() if len(slots) > 1]
    if not multi and not any(not t.pinned and len(t.connections) > 1 for t in targets):
        return targets, False  # one account per model: nothing to keep warm
    key = cache_key(req, explicit_only=True)
    if key is None:
        prefix = _prefix(req.body)
        if len(prefix) < AFFINITY_MIN_PREFIX_CHARS:
            return targets, False
        key = "p:" + hashlib.sha256(prefix.encode()).hexdigest()
    out = list(targets)
    for slots in multi:
        members = sorted((out[i] for i in slots), key=lambda t: -rendezvous_score(key, _identity(t)))
        for i, t in zip(slots, members, strict=True):
            out[i] = t
    for i, t in enumerate(out):
        if not t.pinned and len(t.connections) > 1:
            conns = sorted(t.connections, key=lambda c: -rendezvous_score(key, f"{t.model_str}@{c.id}"))
            out[i] = dataclasses.replace(t, connections=tuple(conns))
    return out, out != targets


class ContextRelay:
    """``context-relay``: definition order plus a handoff message when a session switches model."""

    name = "context-relay"
    expands_connections = False
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        ts = list(ctx.targets)
        session = ctx.request.session_id
        if not session or not ts:
            return Ordering(ts, "definition order (no session: no handoff)")
        name = f"relay:{session}"
        ttl_s = ctx.settings.float_("handoffTtlMinutes", 300.0) * 60.0
        rec = await ctx.state.get_json(name)

        async def on_success(target: ComboTarget, cand: Candidate) -> None:
            await ctx.state.set_json(name, {"model": cand.model_str, "at": ctx.now}, ttl_s)

        available = await ctx.available()
        expected = (available or ts)[0]
        prev = rec.get("model") if isinstance(rec, dict) else None
        if not isinstance(prev, str) or prev == expected.model_str:
            return Ordering(ts, "definition order (session continues on the same model)", on_success)
        limit = ctx.settings.int_("handoffMaxMessages", 30, 1, 1000)
        body = with_handoff(ctx.request.body, prev, expected.model_str, limit)
        return Ordering(ts, f"definition order; handoff {prev} -> {expected.model_str}", on_success, body)


def with_handoff(body: Mapping[str, Any], prev: str, new: str, max_messages: int) -> dict[str, Any]:
    """A copy of ``body`` with the handoff system message inserted after the leading system
    messages: who answered before, and an extractive summary of up to ``max_messages`` earlier
    messages (each cut to 280 characters)."""
    msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    lead = 0
    while lead < len(msgs) and msgs[lead].get("role") in ("system", "developer"):
        lead += 1
    earlier = msgs[lead:-1] if len(msgs) > lead else []
    lines = [
        f"{HANDOFF_MARKER} This conversation was answered by {prev} until now; you ({new}) continue it.",
    ]
    if earlier:
        lines.append(f"Summary of the conversation so far ({len(earlier)} earlier messages):")
        for m in earlier[-max_messages:]:
            text = " ".join(_text(m.get("content")).split())
            if len(text) > _EXCERPT_CHARS:
                text = text[: _EXCERPT_CHARS - 1] + "…"
            if m.get("tool_calls"):
                text = (text + " [tool call]").strip()
            lines.append(f"- {m.get('role', '?')}: {text}")
    else:
        lines.append("There are no earlier messages in this request.")
    lines.append("Carry on from the last user message without repeating earlier answers.")
    handoff = {"role": "system", "content": "\n".join(lines)}
    out = dict(body)
    out["messages"] = [*msgs[:lead], handoff, *msgs[lead:]]
    return out
