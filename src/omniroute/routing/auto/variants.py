"""Zero-config auto ids and their composition (AUTO-1): the parser and the advertised list.

Valid ids (case-insensitive):

- ``auto`` and ``auto/lkgp`` — default weights; ``auto/coding`` quality-first; ``auto/fast``
  ship-fast; ``auto/cheap`` cost-saver; ``auto/offline`` offline-friendly; ``auto/smart``
  quality-first with exploration 10 %; ``auto/chaos`` chaos-mode (SPEC AUTO-1, seed 001 "Quick
  Examples").
- ``auto/<category>[:<tier>]`` — categories ``coding``, ``reasoning``, ``vision``, ``chat``,
  ``multimodal`` filter the pool by capability (vision/multimodal → ``vision``, reasoning →
  ``reasoning``; coding/chat add no filter) and pick quality-first weights (chat: default weights);
  tiers ``fast`` (ship-fast), ``cheap``/``floor`` (cost-saver), ``reliable`` (reliability-first) pick
  the weights, ``free``/``pro`` keep the category weights and filter by model tier (``free`` /
  ``premium``) (reference §3.3).

Filtering is fail-open (no match → the full pool). Every virtual channel routes with the LKGP router
(reference §3.4). Anything else is a 400 that lists the valid ids (:func:`parse_auto_id`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from omniroute.errors import InvalidRequest
from omniroute.routing.auto import packs

__all__ = [
    "ADVERTISED_IDS",
    "CATEGORIES",
    "DEFAULT_EXPLORATION_SMART",
    "TIERS",
    "VARIANTS",
    "AutoVariant",
    "parse_auto_id",
    "valid_ids_text",
]

DEFAULT_EXPLORATION_SMART: Final = 0.10
"""Exploration rate of ``auto/smart`` (AUTO-8)."""

VARIANTS: Final[dict[str, str | None]] = {
    "": None,
    "lkgp": None,
    "coding": packs.QUALITY_FIRST,
    "fast": packs.SHIP_FAST,
    "cheap": packs.COST_SAVER,
    "offline": packs.OFFLINE_FRIENDLY,
    "smart": packs.QUALITY_FIRST,
    "chaos": packs.CHAOS_MODE,
}
"""Variant → weight pack (``None`` = default weights)."""

CATEGORIES: Final[dict[str, tuple[frozenset[str], str | None]]] = {
    "coding": (frozenset(), packs.QUALITY_FIRST),
    "reasoning": (frozenset({"reasoning"}), packs.QUALITY_FIRST),
    "vision": (frozenset({"vision"}), packs.QUALITY_FIRST),
    "chat": (frozenset(), None),
    "multimodal": (frozenset({"vision"}), packs.QUALITY_FIRST),
}
"""Category → (required capabilities, weight pack)."""

TIERS: Final[dict[str, tuple[str | None, str | None]]] = {
    "fast": (packs.SHIP_FAST, None),
    "cheap": (packs.COST_SAVER, None),
    "floor": (packs.COST_SAVER, None),
    "reliable": (packs.RELIABILITY_FIRST, None),
    "free": (None, "free"),
    "pro": (None, "premium"),
}
"""Tier → (weight pack overriding the category's, model-tier filter)."""

ADVERTISED_IDS: Final[tuple[str, ...]] = (
    "auto",
    "auto/coding",
    "auto/fast",
    "auto/cheap",
    "auto/offline",
    "auto/smart",
    "auto/lkgp",
    "auto/chaos",
    "auto/coding:fast",
    "auto/coding:cheap",
    "auto/coding:free",
    "auto/coding:pro",
    "auto/coding:reliable",
    "auto/reasoning",
    "auto/reasoning:pro",
    "auto/vision",
    "auto/multimodal",
)
"""Curated ids listed in ``/v1/models`` and ``GET /api/combos/auto`` (reference §3.3)."""


@dataclass(frozen=True, slots=True)
class AutoVariant:
    """A parsed auto id.

    ``id`` the canonical lower-case id (``auto``, ``auto/coding:pro``); ``channel`` the suffix after
    ``auto/`` or ``auto`` for the base channel (the key of per-API-key exclusions and LKGP records);
    ``pack`` the weight pack (``None`` = default weights); ``capabilities`` required of every pool
    member and ``model_tier`` (``free``/``premium``) — both fail-open; ``exploration`` the bandit
    rate override (``None`` = configured rate); ``tier_hint`` the hinted tier for ``tierAffinity``.
    """

    id: str
    channel: str
    pack: str | None = None
    capabilities: frozenset[str] = frozenset()
    model_tier: str | None = None
    exploration: float | None = None
    tier_hint: str | None = None

    @property
    def filters(self) -> bool:
        """True when the variant narrows the pool."""
        return bool(self.capabilities) or self.model_tier is not None


def valid_ids_text() -> str:
    """The valid ids, for error messages."""
    return (
        "auto, "
        + ", ".join(f"auto/{v}" for v in VARIANTS if v)
        + ", or auto/<category>[:<tier>] with category one of "
        + "|".join(CATEGORIES)
        + " and tier one of "
        + "|".join(TIERS)
    )


def _invalid(model: str, why: str) -> InvalidRequest:
    return InvalidRequest(
        f"Invalid auto model '{model}': {why}. Valid ids: {valid_ids_text()}.", param="model"
    )


@lru_cache(maxsize=256)
def parse_auto_id(model: str) -> AutoVariant:
    """Parse ``auto``, ``auto/<variant>`` or ``auto/<category>[:<tier>]`` (AUTO-1); pure and
    memoised (the result is immutable).

    Raises :class:`~omniroute.errors.InvalidRequest` (400) naming the valid ids for anything else."""
    low = model.strip().lower()
    if low == "auto" or low == "auto/":
        return AutoVariant(id="auto", channel="auto")
    if not low.startswith("auto/"):
        raise _invalid(model, "not an auto id")
    rest = low[5:]
    if "/" in rest:
        raise _invalid(model, "more than one '/'")
    if rest in VARIANTS:
        pack = VARIANTS[rest]
        exploration = DEFAULT_EXPLORATION_SMART if rest == "smart" else None
        return AutoVariant(id=f"auto/{rest}", channel=rest, pack=pack, exploration=exploration)
    category, _, tier = rest.partition(":")
    if category not in CATEGORIES:
        raise _invalid(model, f"unknown variant or category '{category}'")
    if ":" in tier:
        raise _invalid(model, "more than one ':'")
    caps, pack = CATEGORIES[category]
    model_tier: str | None = None
    if tier:
        if tier not in TIERS:
            raise _invalid(model, f"unknown tier '{tier}'")
        tier_pack, model_tier = TIERS[tier]
        pack = tier_pack or pack
    return AutoVariant(
        id=f"auto/{rest}",
        channel=rest,
        pack=pack,
        capabilities=caps,
        model_tier=model_tier,
        tier_hint=model_tier,
    )
