"""Mode packs: whole weight maps that replace the scoring weights (AUTO-4, AUTO-7).

The six packs and their numbers are the table of seed ``001_c34bc1230a1e43d4.txt`` ("Mode Packs");
each sums to 1 ± 0.001 (0.9999 as printed at four decimals). ``cacheAffinity``, ``tierAffinity``,
``specificityMatch`` and ``resetWindowAffinity`` are 0 in every pack. A pack replaces the weights
wholesale (never a merge). :data:`MODE_ALIASES` maps the ``X-OmniRoute-Mode`` header values to a pack
name, or to :data:`DEFAULT_MODE` for the default weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = [
    "CHAOS_MODE",
    "COST_SAVER",
    "DEFAULT_MODE",
    "MODE_ALIASES",
    "MODE_PACKS",
    "OFFLINE_FRIENDLY",
    "QUALITY_FIRST",
    "RELIABILITY_FIRST",
    "SHIP_FAST",
    "resolve_mode",
]

SHIP_FAST: Final = "ship-fast"
COST_SAVER: Final = "cost-saver"
QUALITY_FIRST: Final = "quality-first"
OFFLINE_FRIENDLY: Final = "offline-friendly"
RELIABILITY_FIRST: Final = "reliability-first"
CHAOS_MODE: Final = "chaos-mode"
DEFAULT_MODE: Final = "default"
"""Not a pack: the default weights (``balanced``/``default`` in ``X-OmniRoute-Mode``)."""

# The seed table as printed (rows = factors, columns = packs); cacheAffinity is 0 in every pack.
_TABLE = """
factor               ship-fast  cost-saver  quality-first  offline-friendly  reliability-first  chaos-mode
quota                0.1133     0.1133      0.0752         0.3324            0.1133             0.0376
health               0.2667     0.1810      0.1714         0.2667            0.3524             0.4000
costInv              0.0276     0.3324      0.0276         0.0752            0.0181             0.0140
latencyInv           0.3048     0.0476      0.0476         0.0476            0.0476             0.0186
taskFit              0.0952     0.0952      0.3524         0.0000            0.0952             0.1905
stability            0.0000     0.0476      0.1429         0.0952            0.1905             0.1714
tierPriority         0.0376     0.0376      0.0276         0.0376            0.0276             0.0040
tierAffinity         0.0000     0.0000      0.0000         0.0000            0.0000             0.0000
specificityMatch     0.0000     0.0000      0.0000         0.0000            0.0000             0.0000
contextAffinity      0.0095     0.0000      0.0000         0.0000            0.0000             0.0186
sessionAvailability  0.0476     0.0476      0.0476         0.0476            0.0476             0.0476
resetWindowAffinity  0.0000     0.0000      0.0000         0.0000            0.0000             0.0000
connectionDensity    0.0476     0.0476      0.0476         0.0476            0.0476             0.0476
quality              0.02       0.02        0.03           0.02              0.02               0.02
reliability          0.03       0.03        0.03           0.03              0.04               0.03
"""


def _parse(table: str) -> dict[str, dict[str, float]]:
    header, *rows = (line.split() for line in table.strip().splitlines())
    out: dict[str, dict[str, float]] = {name: {"cacheAffinity": 0.0} for name in header[1:]}
    for factor, *values in rows:
        for name, v in zip(header[1:], values, strict=True):
            out[name][factor] = float(v)
    return out


MODE_PACKS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {name: MappingProxyType(weights) for name, weights in _parse(_TABLE).items()}
)
"""Pack name → ``{factor: weight}`` for all 16 factors (seed 001 "Mode Packs", AUTO-4)."""

MODE_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "fast": SHIP_FAST,
        "fastest": SHIP_FAST,
        "speed": SHIP_FAST,
        "quality": QUALITY_FIRST,
        "best": QUALITY_FIRST,
        "cheap": COST_SAVER,
        "cost": COST_SAVER,
        "saver": COST_SAVER,
        "reliable": RELIABILITY_FIRST,
        "offline": OFFLINE_FRIENDLY,
        "chaos": CHAOS_MODE,
        "balanced": DEFAULT_MODE,
        "default": DEFAULT_MODE,
        **{
            name: name
            for name in (
                SHIP_FAST,
                COST_SAVER,
                QUALITY_FIRST,
                OFFLINE_FRIENDLY,
                RELIABILITY_FIRST,
                CHAOS_MODE,
            )
        },
    }
)
"""``X-OmniRoute-Mode`` value (lower-case) → pack name or :data:`DEFAULT_MODE` (AUTO-7)."""


def resolve_mode(value: str | None) -> str | None:
    """A mode header value → pack name, :data:`DEFAULT_MODE`, or ``None`` when unknown/absent (ignored,
    AUTO-7)."""
    if not value:
        return None
    return MODE_ALIASES.get(value.strip().lower())
