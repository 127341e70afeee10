"""Workloads: the requests a simulation replays, from a JSONL trace or a synthetic spec.

A trace line is one request (fields of :class:`TraceRecord`)::

    {"arrival_s": 0.25, "model": "sim", "prompt_tokens": 900, "completion_tokens": 210,
     "stream": true, "task_type": "code", "session_id": "s-12", "key": "team-a"}

``arrival_s`` is seconds from the start of the run; ``task_type``, ``session_id`` and ``key`` may be
omitted. ``omniroute usage export FILE`` writes such a file from the usage log (arrival times from the
rows' timestamps), so real traffic can be replayed.

A synthetic spec (YAML mapping, the ``workload`` key of a fleet or scenario) generates one, seeded:
a Poisson arrival process whose rate is piecewise constant (``rate``: a list of ``{at_s, per_s}``
steps), ``duration_s``, the share of streamed requests, a task mix (weights) and lognormal token
sizes, with requests spread over ``sessions`` session ids.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from omniroute.core.fields import field_errors
from omniroute.simulate.fleet import Distribution, FleetError

DEFAULT_MODEL = "sim"


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One request of a workload: arrival (s from the start), requested model string, prompt and
    completion tokens, streamed or not, task type (matches the fleet's ``quality`` keys), session id
    and API key name (``None`` when unknown)."""

    arrival_s: float
    model: str
    prompt_tokens: int
    completion_tokens: int
    stream: bool = False
    task_type: str = "default"
    session_id: str | None = None
    key: str | None = None

    def to_json(self) -> bytes:
        """The JSONL line (without the newline)."""
        return orjson.dumps(asdict(self))


class _Edge(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Line(_Edge):
    arrival_s: float = Field(ge=0)
    model: str = Field(min_length=1)
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    stream: bool = False
    task_type: str = "default"
    session_id: str | None = None
    key: str | None = None


class RateStep(_Edge):
    """From ``at_s`` on, requests arrive at ``per_s`` per second on average (Poisson)."""

    at_s: float = Field(0.0, ge=0)
    per_s: float = Field(ge=0)


class SyntheticSpec(_Edge):
    """A generated workload (see the module docstring); times in seconds, sizes in tokens."""

    duration_s: float = Field(600.0, gt=0)
    rate: list[RateStep] = Field(default_factory=lambda: [RateStep(per_s=10.0)], min_length=1)
    model: str = DEFAULT_MODEL
    stream_share: float = Field(0.5, ge=0, le=1)
    tasks: dict[str, float] = Field(default_factory=lambda: {"default": 1.0})
    prompt_tokens: Distribution = Distribution(median=800, sigma=0.8)
    completion_tokens: Distribution = Distribution(median=200, sigma=0.7)
    sessions: int = Field(100, ge=1)
    keys: list[str] = []

    def generate(self, seed: int) -> list[TraceRecord]:
        """The requests, in arrival order; the same ``seed`` gives the same list."""
        return list(self.iter(seed))

    def iter(self, seed: int) -> Iterator[TraceRecord]:
        rng = random.Random(f"workload:{seed}")
        steps = sorted(self.rate, key=lambda s: s.at_s)
        tasks, weights = list(self.tasks), list(self.tasks.values())
        t = 0.0
        i = 0
        while True:
            while i + 1 < len(steps) and steps[i + 1].at_s <= t:
                i += 1
            rate = steps[i].per_s
            if rate <= 0:  # idle until the next step
                if i + 1 >= len(steps):
                    return
                t = steps[i + 1].at_s
                continue
            t += rng.expovariate(rate)
            if i + 1 < len(steps) and t >= steps[i + 1].at_s:
                t = steps[i + 1].at_s  # memoryless: restart the draw at the rate change
                continue
            if t >= self.duration_s:
                return
            yield TraceRecord(
                arrival_s=round(t, 6),
                model=self.model,
                prompt_tokens=max(1, round(self.prompt_tokens.draw(rng.random()))),
                completion_tokens=max(1, round(self.completion_tokens.draw(rng.random()))),
                stream=rng.random() < self.stream_share,
                task_type=rng.choices(tasks, weights)[0],
                session_id=f"s-{rng.randrange(self.sessions)}",
                key=rng.choice(self.keys) if self.keys else None,
            )


def synthetic(spec: Mapping[str, Any]) -> SyntheticSpec:
    """Validate a synthetic spec; raises :class:`FleetError` naming the field (``workload.rate[0].per_s``)."""
    try:
        return SyntheticSpec.model_validate(spec)
    except ValidationError as exc:
        errs = field_errors(exc.errors(include_url=False, include_input=False))
        raise FleetError([(f"workload.{k}", m) for k, m in errs]) from None


def read_trace(path: Path) -> list[TraceRecord]:
    """Read a JSONL trace, sorted by arrival. Raises :class:`FleetError` naming the line and field
    (``line 3.prompt_tokens``) and ``FileNotFoundError`` for a missing file."""
    out: list[TraceRecord] = []
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                item = orjson.loads(raw)
                line = _Line.model_validate(item)
            except orjson.JSONDecodeError as exc:
                raise FleetError([(f"line {n}", f"not JSON ({exc})")]) from None
            except ValidationError as exc:
                errs = field_errors(exc.errors(include_url=False, include_input=False))
                raise FleetError([(f"line {n}.{k}" if k else f"line {n}", m) for k, m in errs]) from None
            out.append(TraceRecord(**line.model_dump()))
    out.sort(key=lambda r: r.arrival_s)
    return out


def write_trace(records: Iterable[TraceRecord], path: Path) -> int:
    """Write ``records`` as JSONL; returns how many."""
    n = 0
    with path.open("wb") as fh:
        for r in records:
            fh.write(r.to_json() + b"\n")
            n += 1
    return n


def trace_from_usage(rows: Iterable[Mapping[str, Any]]) -> list[TraceRecord]:
    """Usage-log rows (``Store.recent_usage`` dicts) → a trace: one record per request (member calls
    of multi-call strategies left out), arrival from ``ts`` relative to the first row, the requested
    model, the recorded tokens, ``stream`` and the API key id. The log has no task type or session:
    those are ``default`` and ``None``."""
    main = sorted((r for r in rows if not r.get("member")), key=lambda r: float(r["ts"]))
    if not main:
        return []
    t0 = float(main[0]["ts"])
    return [
        TraceRecord(
            arrival_s=round(float(r["ts"]) - t0, 6),
            model=str(r.get("requested_model") or DEFAULT_MODEL),
            prompt_tokens=int(r.get("prompt_tokens") or 0),
            completion_tokens=int(r.get("completion_tokens") or 0),
            stream=bool(r.get("stream")),
            key=r.get("api_key_id"),
        )
        for r in main
    ]


__all__ = [
    "DEFAULT_MODEL",
    "RateStep",
    "SyntheticSpec",
    "TraceRecord",
    "read_trace",
    "synthetic",
    "trace_from_usage",
    "write_trace",
]
