"""The virtual factory: an auto channel's candidate pool, rebuilt per request (AUTO-2).

Zero-config channels (:func:`virtual_pool`): one candidate per active connection with a usable
credential — a non-empty API key, no key at all for a server on this machine or the local network
(Ollama, llama.cpp, vLLM need none), or an OAuth access token that has not expired — with model =
the connection's default model, else its provider's first catalog model (reference §3.4). Nothing
is persisted, so a new or recovered connection joins on the next request (the pool is derived from
the registry snapshot, cached on it, and rebuilt when a token in it expires). Persisted ``strategy:
"auto"`` combos (:func:`combo_pool`) expand their targets per connection (or use the virtual pool
when they have none) and keep only ``config.auto.candidatePool`` providers when that list is set.

Then :func:`filter_variant` applies an id's capability / model-tier filter and
:func:`key_exclusions` this API key's exclusions from the store (``auto_exclusions``), cached in
:class:`~omniroute.state.base.RoutingState` for :data:`EXCLUSIONS_TTL_S`; both are fail-open (no
match, or a store error, leaves the pool as it was).
"""

from __future__ import annotations

import ipaddress
import logging
import math
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from omniroute.core.combo import Combo
from omniroute.errors import ExclusionRecord
from omniroute.routing.auto.statics import remember_statics
from omniroute.routing.auto.variants import AutoVariant
from omniroute.routing.combo_expand import expand_targets
from omniroute.routing.decision import Decision
from omniroute.routing.registry import Registry
from omniroute.routing.services import RoutingServices
from omniroute.values import Candidate, Connection, ModelInfo, ProviderInfo

__all__ = [
    "EXCLUSIONS_TTL_S",
    "combo_pool",
    "filter_variant",
    "key_exclusions",
    "set_exclusion",
    "unusable_reason",
    "virtual_pool",
    "virtual_pool_exclusions",
]

log = logging.getLogger("omniroute.auto")

EXCLUSIONS_TTL_S: Final = 60.0
"""How long a key's exclusions are cached in routing state (s); edits invalidate at once."""


def is_local_endpoint(url: str) -> bool:
    """True when ``url`` points at this machine or the local network: a loopback or private IP, or a
    single-label host name (``localhost``, a compose service such as ``ollama``). Servers there —
    Ollama, llama.cpp, vLLM, LM Studio — usually take no API key."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if not host:
        return False
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host
    return ip.is_loopback or (ip.is_private and not ip.is_link_local)


def unusable_reason(conn: Connection, provider: ProviderInfo, now: float) -> str | None:
    """Why ``conn`` cannot serve an auto request (``None`` when it can, AUTO-2): inactive, no API key
    for a remote endpoint, no OAuth token, or an expired one. A connection without a key is usable
    when its endpoint is local (:func:`is_local_endpoint`)."""
    if not conn.is_active:
        return "connection inactive"
    if conn.auth_type == "api_key":
        if conn.api_key or is_local_endpoint(conn.base_url or provider.base_url):
            return None
        return "no API key (a remote provider needs one; set api_key on the connection)"
    if not conn.access_token:
        return "no OAuth access token"
    if conn.expires_at is not None and conn.expires_at <= now:
        return "OAuth access token expired"
    return None


def _model_for(reg: Registry, provider: ProviderInfo, conn: Connection) -> ModelInfo | None:
    if conn.default_model:
        return reg.model_info(provider, conn.default_model)
    return provider.models[0] if provider.models else None


_POOL_MEMO: Final = "auto-virtual-pool"


def virtual_pool(reg: Registry, now: float) -> list[Candidate]:
    """One candidate per usable connection, in catalog then connection-priority order (AUTO-2).

    Built once per registry snapshot (``Registry.memo``) and reused until the first OAuth token in it
    expires (``now`` epoch s); a management edit builds a new snapshot and so a new pool. Returns a
    fresh list of the (immutable) candidates; :func:`virtual_pool_exclusions` says why the other
    connections are not in it."""
    return list(_virtual_pool(reg, now)[0])


def virtual_pool_exclusions(reg: Registry, now: float) -> tuple[ExclusionRecord, ...]:
    """The connections :func:`virtual_pool` left out, each with its reason (shown in the decision
    and in the error when nothing is left)."""
    return _virtual_pool(reg, now)[1]


def _virtual_pool(reg: Registry, now: float) -> tuple[tuple[Candidate, ...], tuple[ExclusionRecord, ...]]:
    hit = reg.memo.get(_POOL_MEMO)
    if hit is not None and hit[2] <= now < hit[3]:
        return hit[0], hit[1]
    out: list[Candidate] = []
    skipped: list[ExclusionRecord] = []
    valid_until = math.inf
    for provider_id, conns in reg.connections.items():
        provider = reg.catalog.provider(provider_id)
        if provider is None:
            continue
        for conn in conns:
            model = _model_for(reg, provider, conn)
            reason = unusable_reason(conn, provider, now)
            if reason is not None:
                skipped.append(ExclusionRecord(provider.id, model.id if model else "", reason, conn.id))
                continue
            if model is not None:
                out.append(Candidate(provider, conn, model))
                if conn.auth_type != "api_key" and conn.expires_at is not None:
                    valid_until = min(valid_until, conn.expires_at)
    reg.memo[_POOL_MEMO] = (tuple(out), tuple(skipped), now, valid_until)
    remember_statics(reg.memo, out)
    return tuple(out), tuple(skipped)


def combo_pool(gw: RoutingServices, combo: Combo, decision: Decision, now: float) -> list[Candidate]:
    """The pool of a persisted ``strategy: "auto"`` combo (AUTO-2): its targets expanded to one
    candidate per usable connection (a pinned ``connection_id`` stays pinned), or the virtual pool
    when it has no targets; then ``config.auto.candidatePool`` (provider ids or ``provider/model``)
    when non-empty, fail-open."""
    reg = gw.registry
    pool: list[Candidate] = []
    skipped: list[ExclusionRecord] = []
    if combo.targets:
        for t in expand_targets(gw, combo, decision):
            for conn in reg.connections.get(t.provider.id, ()):
                if t.connection_id is not None and conn.id != t.connection_id:
                    continue
                reason = unusable_reason(conn, t.provider, now)
                if reason is None:
                    pool.append(Candidate(t.provider, conn, t.model, timeout_s=t.timeout_s, step=t.step))
                else:
                    skipped.append(ExclusionRecord(t.provider.id, t.model.id, reason, conn.id))
    else:
        pool = virtual_pool(reg, now)
        skipped.extend(virtual_pool_exclusions(reg, now))
    if not pool:  # say which connections were left out and why (the request fails with it)
        decision.exclusions.extend(skipped)
    allowed = set(auto_config(combo).get("candidatePool") or ())
    if allowed:
        kept = [c for c in pool if c.provider.id in allowed or c.model_str in allowed]
        if kept:
            pool = kept
    return pool


def auto_config(combo: Combo | None) -> dict[str, Any]:
    """A persisted auto combo's options: ``config`` merged with ``config.auto`` / ``autoConfig``
    (the nested maps win), as one flat dict (reference §3.1)."""
    if combo is None:
        return {}
    cfg = dict(combo.config)
    for nested in ("auto", "autoConfig"):
        sub = cfg.get(nested)
        if isinstance(sub, Mapping):
            cfg.update(sub)
    return cfg


def filter_variant(pool: Sequence[Candidate], variant: AutoVariant) -> tuple[list[Candidate], str | None]:
    """Keep candidates with the variant's capabilities and model tier (AUTO-1); a filter that matches
    nothing keeps the full pool (fail-open). Returns the pool and a note for the decision."""
    if not variant.filters:
        return list(pool), None
    caps, tier = variant.capabilities, variant.model_tier
    kept = [
        c
        for c in pool
        if caps <= (c.model.capabilities or frozenset()) and (tier is None or c.model.tier == tier)
    ]
    what = "+".join(sorted(caps) + ([f"tier={tier}"] if tier else []))
    if not kept:
        return list(pool), f"filter {what} matched nothing: full pool (fail-open)"
    return kept, f"filter {what}: {len(kept)} of {len(pool)}"


def _cache_key(api_key_id: str | None, channel: str) -> str:
    return f"auto:excl:{api_key_id or ''}:{channel}"


async def key_exclusions(gw: RoutingServices, api_key_id: str | None, channel: str) -> set[str]:
    """Candidate keys this API key excluded from ``channel``; empty on any error (fail-open)."""
    key = _cache_key(api_key_id, channel)
    try:
        cached = await gw.state.get_json(key)
        if isinstance(cached, list):
            return set(cached)
        if gw.store is None:
            return set()
        found = await gw.store.list_exclusions(api_key_id, channel)
        await gw.state.set_json(key, sorted(found), ttl_s=EXCLUSIONS_TTL_S)
        return found
    except Exception:  # fail-open (AUTO-2): routing never breaks on the exclusion lookup
        log.warning("auto exclusions lookup failed for channel %s; not filtering", channel, exc_info=True)
        return set()


async def set_exclusion(
    gw: RoutingServices, api_key_id: str | None, channel: str, candidate_keys: Iterable[str], excluded: bool
) -> None:
    """Exclude (or re-include) candidates for this key and channel, then drop the cached list."""
    assert gw.store is not None
    for ck in candidate_keys:
        if excluded:
            await gw.store.add_exclusion(api_key_id, channel, ck)
        else:
            await gw.store.remove_exclusion(api_key_id, channel, ck)
    await gw.state.delete_record(_cache_key(api_key_id, channel))
