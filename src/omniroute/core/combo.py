"""The combo schema (SPEC §6 COMBO-1 … COMBO-6, OPS-2): one typed definition of a combo, used by the
config file, the management API and CLI, the store's JSON and the routing snapshot.

* :class:`ComboTarget` — one step (COMBO-1): exactly one of ``model`` (``provider/model`` or a bare
  model id) and ``combo_ref`` (another combo's name), plus the other keys of :data:`TARGET_KEYS`
  (tags: COMBO-4, prompt: COMBO-6).
* :class:`Combo` — ``name`` (SPEC §4 step 1; ``auto`` is reserved, AUTO-1), ``strategy`` (COMBO-3),
  ``targets``, ``config`` (the camelCase options of COMBO-3 … COMBO-6, checked by
  :class:`ComboOptions` and kept as a deep-frozen mapping), ``description``, ``enabled``.
* :class:`ComboSettings` — the option cascade combo → ``combo_defaults`` → :data:`DEFAULTS`, with the
  :data:`INHERIT` sentinel (COMBO-4, DESIGN house style 11).
* :class:`ComboMapping` — a model → combo glob mapping (COMBO-2, SPEC §4 step 3).

The schema classes' docstrings and field descriptions are the management API's OpenAPI text, so they
name no requirement ids.

Validation happens at the edges and applies the same rules at each:

1. the schema — :func:`parse_combo`, or :class:`Combo` inside the config file's schema. The
   ``strategy`` must be one of the names given as the validation context ``{"strategies": names}``
   (the strategy registry's; any case, ``_`` or space for ``-``, :data:`STRATEGY_ALIASES`) and is
   stored under its registered spelling; without that context it is kept as written (a combo read
   back from the store);
2. :func:`combo_problems` — the rules over the set of combos: targets per strategy
   (:func:`missing_targets`, also the start-up check of config-declared combos), fusion panel size,
   existing ``combo_ref`` names, no cycle, nesting depth ≤ :data:`MAX_COMBO_DEPTH`.

Every failure is a ``(key_path, message)`` pair (``targets[0].weight``, ``config.maxRetries``);
:class:`ComboInvalid` carries them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    StrictBool,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import CoreSchema, core_schema

from omniroute.core.fields import Int, NonEmpty, NotBool, field_errors

__all__ = [
    "DEFAULTS",
    "DEFAULT_MAPPING_PRIORITY",
    "DEFAULT_MAX_PANEL",
    "DEFAULT_STRATEGY",
    "INHERIT",
    "MAX_COMBO_DEPTH",
    "MAX_NAME_CHARS",
    "MAX_STEP_PROMPT_CHARS",
    "ROUTING_STRATEGY_VALUES",
    "STRATEGY_ALIASES",
    "TARGET_KEYS",
    "Combo",
    "ComboInvalid",
    "ComboMapping",
    "ComboName",
    "ComboOptions",
    "ComboSettings",
    "ComboTarget",
    "MappingPattern",
    "OptionsMap",
    "canonical_strategy",
    "combo_problems",
    "freeze",
    "missing_targets",
    "parse_combo",
    "ref_graph_problem",
    "strategy_context",
    "thaw",
]

# --- strategies (COMBO-3) -----------------------------------------------------------------------------

ROUTING_STRATEGY_VALUES: Final[tuple[str, ...]] = (
    "priority",
    "weighted",
    "round-robin",
    "context-relay",
    "fill-first",
    "p2c",
    "random",
    "least-used",
    "cost-optimized",
    "reset-aware",
    "reset-window",
    "headroom",
    "strict-random",
    "auto",
    "lkgp",
    "context-optimized",
    "cache-optimized",
    "fusion",
    "pipeline",
)
"""The 19 built-in strategies in COMBO-3 order; the strategy registry may hold more."""
DEFAULT_STRATEGY: Final = "priority"
STRATEGY_ALIASES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "usage": "least-used",
        "context": "context-optimized",
        "weekly-reset": "reset-window",
        "reset-window-order": "reset-window",
    }
)
"""Legacy strategy names accepted on input (reference §2.1 ``normalizeRoutingStrategy``)."""

_SEPARATORS = re.compile(r"[-_\s]")


def canonical_strategy(name: str, known: Sequence[str] = ROUTING_STRATEGY_VALUES) -> str:
    """The name in ``known`` that ``name`` spells, accepting any case, ``_``/space/nothing for ``-``
    and :data:`STRATEGY_ALIASES` (``"Round_Robin"`` → ``"round-robin"``). Raises ``ValueError``
    listing ``known`` when none matches (COMBO-3)."""
    if name in known:
        return name
    raw = name.strip().lower()
    compact = _SEPARATORS.sub("", STRATEGY_ALIASES.get(raw, raw))
    for candidate in known:
        if _SEPARATORS.sub("", candidate.lower()) == compact:
            return candidate
    raise ValueError(f"unknown strategy {name!r}; valid: {', '.join(known)}")


def strategy_context(strategies: Iterable[str]) -> dict[str, Any]:
    """The pydantic validation context that checks ``strategy`` against ``strategies``."""
    return {"strategies": tuple(strategies)}


# --- frozen option maps --------------------------------------------------------------------------------


def freeze(value: Any) -> Any:
    """A deep, immutable copy of JSON-like data: mappings → ``MappingProxyType``, lists → tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A deep, mutable copy of frozen data (mappings → dict, tuples → list), e.g. to serialise
    :attr:`Combo.config` as JSON."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def _empty_map() -> Mapping[str, Any]:
    return MappingProxyType({})


# --- options (COMBO-3 … COMBO-6) ----------------------------------------------------------------------


def _check_connection_limit(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    requests, window = spec.get("requests"), spec.get("window_s")
    ok = (
        isinstance(requests, int)
        and not isinstance(requests, bool)
        and requests > 0
        and isinstance(window, int | float)
        and not isinstance(window, bool)
        and window > 0
    )
    if not ok:
        raise ValueError("must be {requests: int > 0, window_s: number > 0}")
    return spec


_ConnectionLimit = Annotated[
    dict[str, Any],
    AfterValidator(_check_connection_limit),
    WithJsonSchema(
        {
            "type": "object",
            "properties": {
                "requests": {"type": "integer", "exclusiveMinimum": 0},
                "window_s": {"type": "number", "exclusiveMinimum": 0},
            },
            "required": ["requests", "window_s"],
        }
    ),
]
_Positive = Annotated[float, Field(gt=0, allow_inf_nan=False), NotBool]


class ComboOptions(BaseModel):
    """The ``config`` options of a combo and of the config file's ``combo_defaults``, camelCase.
    ``null`` or absent means "inherit": the combo's value, else ``combo_defaults``, else the built-in
    default. The options below are checked; any other key (``auto``, ``routerStrategy``,
    ``fusionTuning``, ``judgeModel``, ``agenticOrchestration`` …) is kept as given for the strategy
    that reads it."""

    model_config = ConfigDict(extra="allow", frozen=True)

    maxRetries: Annotated[int, Field(ge=0, le=100), NotBool] | None = Field(
        None, description="transient retries per target"
    )
    maxAttempts: Annotated[int, Field(ge=1, le=1000), NotBool] | None = Field(
        None, description="upstream calls per request at most"
    )
    stickyRoundRobinLimit: Annotated[int, Field(ge=1, le=1000), NotBool] | None = Field(
        None, description="round-robin: successes before moving on (default 3)"
    )
    stickyWeightedLimit: Annotated[int, Field(ge=1, le=1_000_000), NotBool] | None = Field(
        None, description="weighted: successes on the drawn step (default 1 = off)"
    )
    handoffMaxMessages: Annotated[int, Field(ge=1, le=1000), NotBool] | None = Field(
        None, description="context-relay: messages summarised (default 30)"
    )
    connectionAwareExpansion: StrictBool | None = Field(None, description="one target per connection")
    promptCacheAffinityEnabled: StrictBool | None = Field(
        None, description="keep a prompt-cache key on one account (default on)"
    )
    targetTimeoutMs: _Positive | None = Field(None, description="per-target attempt timeout (ms)")
    resetWindowTieBandMs: _Positive | None = Field(None, description="reset-window: tie band (ms)")
    handoffTtlMinutes: _Positive | None = Field(None, description="context-relay: session memory (min)")
    tagMatchMode: Literal["any", "all"] | None = Field(None, description="tag routing: any | all")
    connectionLimits: dict[str, _ConnectionLimit] | None = Field(
        None, description="per connection id: {requests, window_s} served per window"
    )


class _FrozenOptions:
    """Validation through :class:`ComboOptions` (its JSON schema too; ``null`` is no options), kept as
    the deep-frozen map of the keys given, serialised back as plain JSON."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        def frozen(options: ComboOptions) -> Mapping[str, Any]:
            result: Mapping[str, Any] = freeze(options.model_dump(exclude_unset=True))
            return result

        checked = core_schema.no_info_after_validator_function(
            frozen,
            handler.generate_schema(ComboOptions),
            serialization=core_schema.plain_serializer_function_ser_schema(thaw),
        )
        return core_schema.no_info_before_validator_function(lambda v: {} if v is None else v, checked)


def _none_as_empty(value: Any) -> Any:
    return () if value is None else value


OptionsMap = Annotated[Mapping[str, Any], _FrozenOptions]
"""The type of :attr:`Combo.config` and of the config file's ``combo_defaults``: a deep-frozen map of
the options given, checked by :class:`ComboOptions`."""

# --- targets -------------------------------------------------------------------------------------------

MAX_STEP_PROMPT_CHARS: Final = 20_000
"""A pipeline step's ``prompt`` limit in characters (COMBO-6)."""


class ComboTarget(BaseModel):
    """One combo step: exactly one of ``model`` (``provider/model`` or a bare catalog model id; a
    bare string stands for ``{model: …}``) and ``combo_ref`` (another combo's name).

    ``connection_id`` pins a connection (model steps only); ``weight`` 0–100 (weighted); ``priority``
    lower first; ``timeout_s`` or ``timeout_ms`` the per-target attempt timeout, not both; ``tags``
    for tag routing; ``prompt`` a pipeline step's prompt (at most 20,000 characters). Any other key
    is an error.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: NonEmpty | None = Field(None, description="provider/model or a bare model id")
    combo_ref: NonEmpty | None = Field(None, description="another combo's name")
    connection_id: NonEmpty | None = Field(None, description="pin this connection (model steps only)")
    weight: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False), NotBool] | None = Field(
        None, description="0–100 (weighted)"
    )
    priority: Int | None = Field(None, description="lower first (priority strategy)")
    timeout_s: _Positive | None = Field(None, description="attempt timeout (s)")
    timeout_ms: _Positive | None = Field(None, description="attempt timeout (ms)")
    tags: Annotated[tuple[str, ...], BeforeValidator(_none_as_empty)] = Field(
        (), description="tag routing: connection tags to match"
    )
    prompt: Annotated[str, Field(max_length=MAX_STEP_PROMPT_CHARS)] | None = Field(
        None, description="pipeline step prompt"
    )

    @model_validator(mode="before")
    @classmethod
    def _bare_model(cls, data: Any) -> Any:
        return {"model": data} if isinstance(data, str) else data

    @field_validator("connection_id")
    @classmethod
    def _pin_on_model_steps(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("combo_ref") is not None:
            raise ValueError("not allowed on a combo_ref target")
        return value

    @field_validator("timeout_ms")
    @classmethod
    def _one_timeout(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("timeout_s") is not None:
            raise ValueError("give timeout_s or timeout_ms, not both")
        return value

    @model_validator(mode="after")
    def _model_or_ref(self) -> ComboTarget:
        if (self.model is None) == (self.combo_ref is None):
            raise ValueError("a target must have exactly one of 'model' or 'combo_ref'")
        return self

    @property
    def is_ref(self) -> bool:
        """True for a ``{combo_ref: name}`` step."""
        return self.combo_ref is not None

    @property
    def timeout(self) -> float | None:
        """The per-target attempt timeout in seconds (``timeout_ms`` converted), ``None`` when unset."""
        return self.timeout_s if self.timeout_ms is None else self.timeout_ms / 1000.0

    def to_json(self) -> dict[str, Any]:
        """The step as stored and served: only the keys that were set, e.g. ``{"model": "a/b"}``."""
        return self.model_dump(mode="json", exclude_defaults=True)


TARGET_KEYS: Final[tuple[str, ...]] = tuple(ComboTarget.model_fields)
"""The keys a target may carry (OPS-2, COMBO-1, COMBO-6)."""

# --- combos --------------------------------------------------------------------------------------------

MAX_NAME_CHARS: Final = 200
MAX_COMBO_DEPTH: Final = 3
"""Combo refs nest at most this deep (COMBO-1)."""
DEFAULT_MAX_PANEL: Final = 40
"""A fusion panel's member limit when ``fusionTuning.maxPanel`` is not set (COMBO-5)."""


_NAME_SEGMENT = re.compile(r"[A-Za-z0-9._:@+-]+")
"""One ``/``-separated part of a combo name: the characters model ids use (``gpt-4o``,
``llama3.1:8b``, ``claude-3-5-sonnet@20240620``). A name may hold ``/`` (``openai/gpt-4o`` shadows
that model) but no ``.``/``..`` part, whitespace, ``?``, ``#``, ``%`` or other characters that change
a URL path (combos are addressed as ``/api/combos/{name}``)."""


def _check_name(name: str) -> str:
    low = name.lower()
    if low.startswith("combo/"):
        raise ValueError("must not start with 'combo/' (that prefix addresses combos)")
    if not name.isprintable():
        raise ValueError("must not contain control characters")
    for part in name.split("/"):
        if not _NAME_SEGMENT.fullmatch(part) or part in (".", ".."):
            raise ValueError(
                f"{name!r} is not a valid combo name: use letters, digits and . _ : @ + - in parts "
                "separated by single '/' (no empty, '.' or '..' part)"
            )
    if low == "auto" or low.startswith("auto/"):
        raise ValueError("'auto' and 'auto/…' are reserved for auto routing; use strategy 'auto' instead")
    return name


ComboName = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_NAME_CHARS),
    AfterValidator(_check_name),
]
"""A combo name: what clients send as ``model`` (SPEC §4 step 1); ``combo/`` and ``auto`` are taken."""


class Combo(BaseModel):
    """A combo: a named routing recipe over ordered targets, called by its exact name.

    ``strategy`` is a registered strategy name; ``config`` holds the options (absent keys inherit
    from ``combo_defaults``, then the built-in defaults); a disabled combo is not routable. An
    ``auto`` combo may have no targets (it uses every connected model).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ComboName
    strategy: NonEmpty = Field(DEFAULT_STRATEGY, description="a registered strategy name")
    targets: Annotated[tuple[ComboTarget, ...], BeforeValidator(_none_as_empty)] = ()
    config: OptionsMap = Field(default_factory=_empty_map)
    description: str | None = None
    enabled: bool = True

    @field_validator("strategy")
    @classmethod
    def _registered_strategy(cls, value: str, info: ValidationInfo) -> str:
        known = (info.context or {}).get("strategies")
        return value if known is None else canonical_strategy(value, known)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Combo:
        """A combo as the store holds it (its JSON was validated when it was written), rebuilt without
        checking it again; store-only keys (``id``, ``sort_order``, timestamps) are dropped."""
        targets = tuple(_stored_target(t) for t in row.get("targets") or () if isinstance(t, str | Mapping))
        return cls.model_construct(
            name=str(row["name"]),
            strategy=str(row.get("strategy") or DEFAULT_STRATEGY),
            targets=targets,
            config=freeze(row.get("config") or {}),
            description=row.get("description"),
            enabled=bool(row.get("enabled", True)),
        )

    def refs(self) -> list[str]:
        """The ``combo_ref`` names of the steps, in order."""
        return [t.combo_ref for t in self.targets if t.combo_ref is not None]

    def to_json(self) -> dict[str, Any]:
        """The combo as the store keeps it and the management API shows it (COMBO-1)."""
        return {
            "name": self.name,
            "strategy": self.strategy,
            "targets": [t.to_json() for t in self.targets],
            "config": thaw(self.config),
            "description": self.description,
            "enabled": self.enabled,
        }


def _stored_target(raw: str | Mapping[str, Any]) -> ComboTarget:
    if isinstance(raw, str):
        return ComboTarget.model_construct(model=raw)
    given = {k: v for k, v in raw.items() if k in TARGET_KEYS}
    if "tags" in given:
        given["tags"] = tuple(given["tags"] or ())
    return ComboTarget.model_construct(**given)


class ComboInvalid(ValueError):
    """A combo definition that must be rejected (a 400 naming the field, a config error naming the key
    path). ``errors`` holds ``(key_path, message)`` pairs, relative to the combo (``targets[0].weight``);
    ``param``/``message`` are the first one's."""

    def __init__(self, errors: Iterable[tuple[str, str]]) -> None:
        self.errors = tuple(errors)
        self.param, self.message = self.errors[0]
        super().__init__("\n".join(f"{p}: {m}" if p else m for p, m in self.errors))


def parse_combo(data: Mapping[str, Any], strategies: Sequence[str] = ROUTING_STRATEGY_VALUES) -> Combo:
    """Validate a combo definition against the schema with ``strategies`` as the registered names.
    Raises :class:`ComboInvalid` listing every field error."""
    try:
        return Combo.model_validate(data, context=strategy_context(strategies))
    except ValidationError as exc:
        raise ComboInvalid(field_errors(exc.errors())) from None


def missing_targets(combo: Combo) -> str | None:
    """Why ``combo`` cannot run without targets, or ``None``: every strategy but ``auto`` needs at
    least one (a fusion panel a member, a pipeline a step; COMBO-1, COMBO-5, COMBO-6)."""
    if combo.targets or combo.strategy == "auto":
        return None
    if combo.strategy == "fusion":
        return "a fusion panel needs at least 1 member"
    if combo.strategy == "pipeline":
        return "a pipeline needs at least 1 step"
    return "a combo needs at least one target"


def _max_panel(combo: Combo) -> int:
    tuning = combo.config.get("fusionTuning")
    limit = tuning.get("maxPanel") if isinstance(tuning, Mapping) else None
    if isinstance(limit, int | float) and not isinstance(limit, bool):
        return int(limit)
    return DEFAULT_MAX_PANEL


def combo_problems(combo: Combo, others: Mapping[str, Combo]) -> list[tuple[str, str]]:
    """``(key_path, message)`` for each rule over the set of combos that ``combo`` breaks: targets
    (:func:`missing_targets`), a fusion panel above ``fusionTuning.maxPanel`` (default 40), a
    ``combo_ref`` to no combo of ``others`` (the other combos by name), a ref cycle or a nesting
    deeper than :data:`MAX_COMBO_DEPTH` (COMBO-1, COMBO-5)."""
    out: list[tuple[str, str]] = []
    missing = missing_targets(combo)
    if missing is not None:
        out.append(("targets", missing))
    panel = _max_panel(combo)
    if combo.strategy == "fusion" and len(combo.targets) > panel:
        why = f"a fusion panel has at most {panel} members (maxPanel), got {len(combo.targets)}"
        out.append(("targets", why))
    for i, t in enumerate(combo.targets):
        if t.combo_ref is not None and t.combo_ref != combo.name and t.combo_ref not in others:
            out.append((f"targets[{i}].combo_ref", f"no combo named '{t.combo_ref}'"))
    graph = {name: c.refs() for name, c in others.items()}
    graph[combo.name] = combo.refs()
    problem = ref_graph_problem(combo.name, graph)
    if problem is not None:
        out.append(("targets", problem))
    return out


def ref_graph_problem(name: str, graph: Mapping[str, Sequence[str]]) -> str | None:
    """A cycle through ``name`` or a chain of refs through ``name`` nested deeper than
    :data:`MAX_COMBO_DEPTH`, as a message; ``None`` when there is neither. ``graph`` maps each combo
    name to the names it refers to (``name`` included)."""

    def cycle_from(node: str, path: list[str]) -> list[str] | None:
        for ref in graph.get(node, ()):
            if ref == name:
                return [*path, ref]
            if ref in graph and ref not in path:
                found = cycle_from(ref, [*path, ref])
                if found:
                    return found
        return None

    cycle = cycle_from(name, [name])
    if cycle:
        return "combo_ref cycle: " + " -> ".join(cycle)

    def longest(node: str, seen: frozenset[str], step: Callable[[str], Iterable[str]]) -> list[str]:
        best: list[str] = []
        for nxt in step(node):
            if nxt in graph and nxt not in seen:
                sub = longest(nxt, seen | {nxt}, step)
                if len(sub) + 1 > len(best):
                    best = [nxt, *sub]
        return best

    def down(node: str) -> Iterable[str]:
        return graph.get(node, ())

    def up(node: str) -> Iterable[str]:
        return [other for other, refs in graph.items() if node in refs]

    start = frozenset({name})
    chain = [*reversed(longest(name, start, up)), name, *longest(name, start, down)]
    if len(chain) - 1 > MAX_COMBO_DEPTH:
        return f"combo_ref nesting depth {len(chain) - 1} > {MAX_COMBO_DEPTH}: " + " -> ".join(chain)
    return None


# --- model → combo mappings (COMBO-2) -----------------------------------------------------------------

DEFAULT_MAPPING_PRIORITY: Final = 0

MappingPattern = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]
"""A mapping's glob (``*``, ``?``; matched case-insensitively)."""


class ComboMapping(BaseModel):
    """A model → combo mapping: a model string matching the glob ``pattern``
    (case-insensitive) routes to the combo named ``combo``; higher ``priority`` first; disabled ones
    are skipped."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: MappingPattern
    combo: NonEmpty
    priority: Int = DEFAULT_MAPPING_PRIORITY
    enabled: bool = True
    description: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ComboMapping:
        """A mapping as the store lists it (``combo_name``: the mapped combo's current name), rebuilt
        without checking it again."""
        return cls.model_construct(
            pattern=str(row["pattern"]),
            combo=str(row["combo_name"]),
            priority=int(row.get("priority") or 0),
            enabled=bool(row.get("enabled", True)),
            description=row.get("description"),
        )


# --- the option cascade (COMBO-3, COMBO-4; DESIGN house style 11) --------------------------------------


class _Inherit:
    """Sentinel type: a setting that is not set at this level."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "INHERIT"

    def __bool__(self) -> bool:
        return False


INHERIT: Final = _Inherit()

DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "stickyRoundRobinLimit": 3,  # COMBO-3 round-robin
        "stickyWeightedLimit": 1,  # COMBO-3 weighted (1 = off)
        "connectionAwareExpansion": False,  # COMBO-4
        "promptCacheAffinityEnabled": True,  # COMBO-4 (global default on)
        "tagMatchMode": "any",  # COMBO-4 tag routing: any | all
        "resetAwareTieBand": 0.05,  # COMBO-3 reset-aware: 5 % tie band rotates
        "resetWindowTieBandMs": 60_000,  # COMBO-3 reset-window: ties within 60 s rotate
        "handoffTtlMinutes": 300,  # context-relay session memory
        "handoffMaxMessages": 30,  # context-relay summary input
    }
)
"""Built-in defaults of the combo options strategies read (the last level of the cascade)."""


@dataclass(frozen=True, slots=True)
class ComboSettings:
    """Combo options with the combo → global → default cascade (COMBO-4, DESIGN 11).

    ``combo`` is the combo's ``config`` map, ``global_`` the gateway-wide ``combo_defaults``. A key
    that is absent or ``None`` at one level inherits from the next.
    """

    combo: Mapping[str, Any] = field(default_factory=dict)
    global_: Mapping[str, Any] = field(default_factory=dict)

    def raw(self, key: str) -> Any:
        """The first level's value, or :data:`INHERIT` when no level (defaults included) sets it."""
        for level in (self.combo, self.global_, DEFAULTS):
            v = level.get(key)
            if v is not None:
                return v
        return INHERIT

    def get(self, key: str, default: Any = None) -> Any:
        """The effective value, else ``default``."""
        v = self.raw(key)
        return default if v is INHERIT else v

    def int_(self, key: str, default: int, lo: int, hi: int) -> int:
        """An integer clamped to ``[lo, hi]``; malformed values give ``default``."""
        try:
            return max(lo, min(hi, int(self.get(key, default))))
        except (TypeError, ValueError):
            return default

    def float_(self, key: str, default: float) -> float:
        """A float; malformed values give ``default``."""
        try:
            return float(self.get(key, default))
        except (TypeError, ValueError):
            return default

    def bool_(self, key: str, default: bool = False) -> bool:
        """A boolean (``"true"``/``"1"`` strings accepted)."""
        v = self.get(key, default)
        if isinstance(v, str):
            return v.strip().lower() in ("1", "true", "yes", "on")
        return bool(v)
