"""The routing decision: why a target was chosen (SPEC §1 "decision", OBS-2, API-7).

A :class:`Decision` is built by the engine for every request, carried in the compact
``X-OmniRoute-Decision`` header and stored for ``GET /api/routing/decisions/{request_id}``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from omniroute.errors import AttemptRecord, ExclusionRecord


@dataclass
class Decision:
    """Everything the engine knew and did for one request.

    ``candidates``: one dict per candidate considered, in tried order (``provider``, ``model``,
    ``connection`` and, for auto, ``score`` and ``factors``); ``exclusions`` and ``attempts`` as in
    RESIL-7 diagnostics; ``reason`` is the strategy's or router's human explanation.
    """

    request_id: str
    requested_model: str
    route: str = "model"
    strategy: str = "single"
    combo: str | None = None
    reason: str = ""
    candidates: list[dict[str, Any]] = field(default_factory=list)
    exclusions: list[ExclusionRecord] = field(default_factory=list)
    attempts: list[AttemptRecord] = field(default_factory=list)
    served: str | None = None
    final_score: float | None = None
    top_factors: list[tuple[str, float]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    ts: float = field(default_factory=time.time)

    def header(self) -> str:
        """Compact ``key=value; …`` summary for ``X-OmniRoute-Decision`` (API-7, OBS-2)."""
        parts = [f"route={self.route}", f"strategy={self.strategy}"]
        if self.combo:
            parts.append(f"combo={self.combo}")
        if self.served:
            parts.append(f"served={self.served}")
        if self.final_score is not None:
            parts.append(f"score={self.final_score:.3f}")
        if self.top_factors:
            parts.append("top=" + ",".join(f"{k}:{v:.2f}" for k, v in self.top_factors[:3]))
        parts.append(f"candidates={len(self.candidates)}")
        if self.exclusions:
            parts.append(f"excluded={len(self.exclusions)}")
        if len(self.attempts) > 1:
            parts.append("fallback=" + ">".join(f"{a.provider}:{a.status}" for a in self.attempts))
        if self.extra.get("exploration"):
            parts.append("exploration=1")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON form returned by ``GET /api/routing/decisions/{request_id}`` (OBS-2)."""
        return {
            "request_id": self.request_id,
            "ts": self.ts,
            "requested_model": self.requested_model,
            "route": self.route,
            "strategy": self.strategy,
            "combo": self.combo,
            "reason": self.reason,
            "served": self.served,
            "final_score": self.final_score,
            "candidates": self.candidates,
            "exclusions": [
                {"provider": e.provider, "model": e.model, "connection": e.connection, "reason": e.reason}
                for e in self.exclusions
            ],
            "attempts": [
                {
                    "provider": a.provider,
                    "model": a.model,
                    "connection": a.connection,
                    "status": a.status,
                    "reason": a.reason,
                    "latency_ms": round(a.latency_ms, 2),
                }
                for a in self.attempts
            ],
            **self.extra,
        }
