"""The routing decision: why a target was chosen (SPEC §1 "decision", OBS-2, API-7).

A :class:`Decision` is built by the engine for every request, carried in the compact
``X-OmniRoute-Decision`` header and stored for ``GET /api/routing/decisions/{request_id}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import orjson

from omniroute.errors import AttemptRecord, ExclusionRecord


class Decision:
    """Everything the engine knew and did for one request.

    ``candidates``: one dict per candidate considered, in tried order (``provider``, ``model``,
    ``connection`` and, for auto, ``score`` and ``factors``); ``exclusions`` and ``attempts`` as in
    RESIL-7 diagnostics; ``reason`` is the strategy's or router's human explanation; ``ts`` is when
    the request arrived (epoch s on the gateway's clock; 0 for a scratch decision that is never
    stored).

    Candidate rows may be deferred (:meth:`defer_candidates`): the planner hands over a builder and
    the rows are made the first time ``candidates`` is read (the decision is serialised off the
    request path), in the order they were added.
    """

    __slots__ = (
        "_deferred",
        "_rows",
        "attempts",
        "combo",
        "exclusions",
        "extra",
        "final_score",
        "reason",
        "request_id",
        "requested_model",
        "route",
        "served",
        "strategy",
        "top_factors",
        "ts",
    )

    def __init__(
        self,
        request_id: str,
        requested_model: str,
        route: str = "model",
        strategy: str = "single",
        combo: str | None = None,
        reason: str = "",
        candidates: list[dict[str, Any]] | None = None,
        exclusions: list[ExclusionRecord] | None = None,
        attempts: list[AttemptRecord] | None = None,
        served: str | None = None,
        final_score: float | None = None,
        top_factors: list[tuple[str, float]] | None = None,
        extra: dict[str, Any] | None = None,
        ts: float = 0.0,
    ) -> None:
        self.request_id = request_id
        self.requested_model = requested_model
        self.route = route
        self.strategy = strategy
        self.combo = combo
        self.reason = reason
        self._rows: list[dict[str, Any]] = [] if candidates is None else candidates
        self._deferred: list[tuple[int, Callable[[], list[dict[str, Any]]], Packer | None]] | None = None
        self.exclusions: list[ExclusionRecord] = [] if exclusions is None else exclusions
        self.attempts: list[AttemptRecord] = [] if attempts is None else attempts
        self.served = served
        self.final_score = final_score
        self.top_factors: list[tuple[str, float]] = [] if top_factors is None else top_factors
        self.extra: dict[str, Any] = {} if extra is None else extra
        self.ts = ts

    @property
    def candidates(self) -> list[dict[str, Any]]:
        """The candidate rows (deferred ones are built now, once)."""
        if self._deferred is not None:
            deferred, self._deferred = self._deferred, None
            for _, build, _ in deferred:
                self._rows.extend(build())
        return self._rows

    @candidates.setter
    def candidates(self, rows: list[dict[str, Any]]) -> None:
        self._rows = rows
        self._deferred = None

    def defer_candidates(
        self, count: int, build: Callable[[], list[dict[str, Any]]], pack: Packer | None = None
    ) -> None:
        """Append ``count`` candidate rows that ``build()`` makes when ``candidates`` is first read.
        ``pack()``, when given, makes the same rows in the packed form of :meth:`to_stored`. Both
        must only read values that no longer change."""
        if self._deferred is None:
            self._deferred = []
        self._deferred.append((count, build, pack))

    @property
    def candidate_count(self) -> int:
        """``len(candidates)`` without building deferred rows."""
        pending = sum(n for n, _, _ in self._deferred) if self._deferred is not None else 0
        return len(self._rows) + pending

    def __repr__(self) -> str:
        return (
            f"Decision(request_id={self.request_id!r}, requested_model={self.requested_model!r}, "
            f"route={self.route!r}, strategy={self.strategy!r}, served={self.served!r})"
        )

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
        parts.append(f"candidates={self.candidate_count}")
        if self.exclusions:
            parts.append(f"excluded={len(self.exclusions)}")
        if len(self.attempts) > 1:
            parts.append("fallback=" + ">".join(f"{a.provider}:{a.status}" for a in self.attempts))
        if self.extra.get("exploration"):
            parts.append("exploration=1")
        return "; ".join(parts)

    def to_stored(self) -> dict[str, Any]:
        """The form written to the store: :meth:`to_dict`, except that deferred rows with a packer
        go in ``candidates_packed`` (column names once, then one list of values per row; see
        :func:`expand_stored`). An auto decision's 50 rows × 16 factors serialise to about half the
        JSON at about half the CPU (PERF-2, PERF-5); the rows are never built as dicts."""
        deferred = self._deferred
        if self._rows or not deferred or any(p is None for _, _, p in deferred):
            return self.to_dict()
        packed: dict[str, Any] | None = None
        for _, _, pack in deferred:
            assert pack is not None
            part = pack()
            if packed is None:
                packed = part
            else:
                packed["rows"].extend(part["rows"])
        out = self._base_dict()
        out["candidates"] = []
        out["candidates_packed"] = packed
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON form returned by ``GET /api/routing/decisions/{request_id}`` (OBS-2)."""
        out = self._base_dict()
        out["candidates"] = self.candidates
        return out

    def _base_dict(self) -> dict[str, Any]:
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
            "candidates": None,
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


class StoredDecision(NamedTuple):
    """A decision already in the form written to the store: ``payload`` is the JSON of
    :meth:`Decision.to_stored` (bytes, ≈ 10.7 kB for an auto decision with 50 candidates, in one
    allocation); ``ts`` is the request's arrival (epoch s). It holds none of the engine's objects (the
    scoring records an auto :class:`Decision` keeps until its rows are built), so a queue of them grows
    only by what will be written (PERF-5)."""

    request_id: str
    ts: float
    payload: bytes

    @classmethod
    def of(cls, decision: Decision) -> StoredDecision:
        """``decision`` serialised now (≈ 37 µs for an auto decision; see :meth:`Decision.to_stored`)."""
        payload = orjson.dumps(decision.to_stored(), option=orjson.OPT_NON_STR_KEYS)
        return cls(decision.request_id, decision.ts, payload)

    def to_dict(self) -> dict[str, Any]:
        """The :meth:`Decision.to_dict` form (as JSON values), via :func:`expand_stored`."""
        data: dict[str, Any] = orjson.loads(self.payload)
        return expand_stored(data)


Packer = Callable[[], dict[str, Any]]
"""Makes deferred candidate rows in packed form: ``{"columns": [...], "rows": [[...], ...],
"nested": {column: [names]}, "optional": [columns]}`` (see :func:`expand_stored`)."""


def expand_stored(data: dict[str, Any]) -> dict[str, Any]:
    """A stored decision (:meth:`Decision.to_stored`) → the :meth:`Decision.to_dict` form: each packed
    row becomes ``dict(zip(columns, row))``; a ``nested`` column's list becomes ``dict(zip(names,
    values))``; an ``optional`` column is left out where its value is null."""
    packed = data.pop("candidates_packed", None)
    if not packed:
        return data
    columns: list[str] = packed["columns"]
    nested: dict[str, list[str]] = packed.get("nested") or {}
    optional = set(packed.get("optional") or ())
    rows = data.get("candidates") or []
    for values in packed["rows"]:
        row = dict(zip(columns, values, strict=True))
        for col, names in nested.items():
            row[col] = dict(zip(names, row[col], strict=True))
        for col in optional:
            if row.get(col) is None:
                row.pop(col, None)
        rows.append(row)
    data["candidates"] = rows
    return data
