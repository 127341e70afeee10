"""Last-known-good-provider records (AUTO-5a, seed ``000_0adfdb29c1e03aa3.txt``).

A record is written on every successful response of an auto route and read by the ``lkgp`` router
on the next request of the same conversation. It is keyed by combo (the auto channel or persisted
combo name) and session, so one conversation sticks to one provider while other conversations are
scored freely. Session = ``X-Session-Id`` / ``X-OmniRoute-Session`` header, else a stable hash of
API key id + system prompt + first user message (:func:`session_key`). Config ``auto.lkgp_scope``
widens the key to the whole combo (``combo``) or the whole gateway (``global``).

Records live in :class:`~omniroute.state.base.RoutingState` as JSON ``{provider, key, ts}`` (``key``
the candidate key ``provider/model@connection``, so the conversation also keeps its connection and
prompt cache) and expire after :data:`LKGP_TTL_S` seconds without a success.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from omniroute.routing.auto.fitness import request_text
from omniroute.state.base import RoutingState
from omniroute.values import Candidate, ChatRequest

__all__ = ["LKGP_TTL_S", "LkgpRecord", "lkgp_state_key", "read_lkgp", "session_key", "write_lkgp"]

LKGP_TTL_S: Final = 24 * 3600.0
"""A conversation idle for a day is scored afresh (seconds; ours, not in SPEC)."""


@dataclass(frozen=True, slots=True)
class LkgpRecord:
    """The provider id and candidate key that last served the conversation, and when (epoch s)."""

    provider: str
    key: str | None = None
    ts: float = 0.0


def conversation_hash(api_key_id: str | None, body: Mapping[str, Any]) -> str:
    """Stable 16-hex hash of API key id + system prompt + first user message."""
    system, first, _ = request_text(body)
    h = hashlib.blake2b(digest_size=8)
    for part in (api_key_id or "", system, first):
        h.update(part.encode("utf-8", "replace"))
        h.update(b"\x1f")
    return h.hexdigest()


def session_key(req: ChatRequest, conversation: str | None = None) -> str:
    """The request's session: its session header, else :func:`conversation_hash` (AUTO-5a);
    ``conversation`` is that hash when the caller already has it."""
    if req.session_id:
        return "s:" + req.session_id
    return "h:" + (conversation or conversation_hash(req.api_key_id, req.body))


def lkgp_state_key(combo: str, session: str, scope: str = "session") -> str:
    """State key of the record for ``combo`` and ``session`` under ``scope``
    (``session``|``combo``|``global``)."""
    if scope == "global":
        return "auto:lkgp:*"
    if scope == "combo":
        return f"auto:lkgp:{combo}"
    return f"auto:lkgp:{combo}:{session}"


async def read_lkgp(state: RoutingState, key: str) -> LkgpRecord | None:
    """The record under ``key``, or ``None`` (absent, expired or unreadable)."""
    data = await state.get_json(key)
    if not isinstance(data, dict) or not data.get("provider"):
        return None
    return LkgpRecord(str(data["provider"]), data.get("key"), float(data.get("ts") or 0.0))


async def write_lkgp(state: RoutingState, key: str, cand: Candidate, now: float) -> None:
    """Record ``cand`` as the last known good target under ``key``."""
    await state.set_json(key, {"provider": cand.provider.id, "key": cand.key, "ts": now}, ttl_s=LKGP_TTL_S)
