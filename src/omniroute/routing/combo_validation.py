"""Validation of combo definitions for the management API and the CLI (COMBO-1, COMBO-3, COMBO-4,
SPEC §4 shadowing).

:func:`check_combo` takes a combo as a plain dict (after a PUT's fields are merged in), the stored
combos and the routing snapshot, and returns the normalised combo plus non-blocking warnings, or
raises :class:`ComboInvalid` (→ 400) naming the field:

* ``name``: non-empty, ≤ 200 characters, not starting with ``combo/`` (that prefix addresses combos,
  SPEC §4 step 2);
* ``strategy``: one of the 19 (legacy aliases accepted), canonicalised — the message lists them;
* ``targets``: at least one (an ``auto`` combo may have none: it uses the virtual pool); each has
  only the keys of :data:`TARGET_KEYS` (those a config-file target allows) and exactly one of
  ``model`` / ``combo_ref``; ``weight`` 0–100; ``priority`` integer; ``timeout_s`` or
  ``timeout_ms`` > 0, not both; ``connection_id`` only on model targets and, when known, of the
  target's provider; a bare string is a model target;
* ``combo_ref``: must exist; no cycle; nesting depth ≤ 3 counted from any combo that reaches this one;
* fusion: 1 … ``fusionTuning.maxPanel`` (40) members; pipeline: ≥ 1 step;
* ``config``: types and ranges of the options routing reads (``maxRetries`` ≥ 0, ``maxAttempts`` ≥ 1,
  ``stickyRoundRobinLimit`` 1–1000, ``stickyWeightedLimit`` ≥ 1, booleans, ``tagMatchMode``
  any|all, ``targetTimeoutMs`` > 0, ``connectionLimits``).

Unknown providers, models and connections are warnings, not errors: the catalog may be stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from omniroute.routing.combos import MAX_COMBO_DEPTH, canonical_strategy
from omniroute.routing.registry import Registry

__all__ = [
    "MAX_NAME_CHARS",
    "MAX_STEP_PROMPT_CHARS",
    "TARGET_KEYS",
    "ComboInvalid",
    "check_combo",
    "ref_graph_problem",
]

MAX_NAME_CHARS = 200
MAX_STEP_PROMPT_CHARS = 20_000
"""A pipeline step's ``prompt`` limit (COMBO-6); the config file allows the same."""
TARGET_KEYS = (
    "model",
    "combo_ref",
    "connection_id",
    "weight",
    "priority",
    "timeout_s",
    "timeout_ms",
    "tags",
    "prompt",
)
"""The keys a target may carry: exactly those of a config-file target (OPS-2, COMBO-1, COMBO-6)."""
DEFAULT_MAX_PANEL = 40  # COMBO-5 maxPanel
_INT_OPTIONS: Mapping[str, tuple[int, int | None]] = {
    "maxRetries": (0, 100),
    "maxAttempts": (1, 1000),
    "stickyRoundRobinLimit": (1, 1000),
    "stickyWeightedLimit": (1, 1_000_000),
    "handoffMaxMessages": (1, 1000),
}
_BOOL_OPTIONS = ("connectionAwareExpansion", "promptCacheAffinityEnabled")
_POSITIVE_OPTIONS = ("targetTimeoutMs", "resetWindowTieBandMs", "handoffTtlMinutes")


class ComboInvalid(ValueError):
    """A combo definition that must be rejected (400); ``param`` names the field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _check_options(cfg: Any) -> dict[str, Any]:
    if cfg is None:
        return {}
    if not isinstance(cfg, Mapping):
        raise ComboInvalid("config must be an object", "config")
    for key, (lo, hi) in _INT_OPTIONS.items():
        v = cfg.get(key)
        if v is None:
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
            span = f"{lo}–{hi}" if hi is not None else f"≥ {lo}"
            raise ComboInvalid(f"config.{key} must be an integer {span}, got {v!r}", f"config.{key}")
    for key in _BOOL_OPTIONS:
        if cfg.get(key) is not None and not isinstance(cfg[key], bool):
            raise ComboInvalid(f"config.{key} must be true or false", f"config.{key}")
    for key in _POSITIVE_OPTIONS:
        v = cfg.get(key)
        if v is not None and (not _num(v) or v <= 0):
            raise ComboInvalid(f"config.{key} must be a positive number", f"config.{key}")
    mode = cfg.get("tagMatchMode")
    if mode is not None and mode not in ("any", "all"):
        raise ComboInvalid("config.tagMatchMode must be 'any' or 'all'", "config.tagMatchMode")
    limits = cfg.get("connectionLimits")
    if limits is not None:
        if not isinstance(limits, Mapping):
            raise ComboInvalid(
                "config.connectionLimits must map connection ids to limits", "config.connectionLimits"
            )
        for conn, spec in limits.items():
            at = f"config.connectionLimits.{conn}"
            ok = (
                isinstance(spec, Mapping)
                and isinstance(spec.get("requests"), int)
                and spec["requests"] > 0
                and _num(spec.get("window_s"))
                and spec["window_s"] > 0
            )
            if not ok:
                raise ComboInvalid(f"{at} must be {{requests: int > 0, window_s: number > 0}}", at)
    return dict(cfg)


def _check_target(i: int, raw: Any, reg: Registry | None, warnings: list[dict[str, Any]]) -> dict[str, Any]:
    at = f"targets[{i}]"
    t: dict[str, Any] = (
        {"model": raw} if isinstance(raw, str) else dict(raw) if isinstance(raw, Mapping) else {}
    )
    if not t:
        raise ComboInvalid(f"{at} must be an object or a 'provider/model' string", at)
    for key in t:
        if key not in TARGET_KEYS:
            raise ComboInvalid(
                f"{at}.{key} is not a target field (allowed: {', '.join(TARGET_KEYS)})", f"{at}.{key}"
            )
    model, ref = t.get("model"), t.get("combo_ref")
    if (model is None) == (ref is None):
        raise ComboInvalid(f"{at} must have exactly one of 'model' or 'combo_ref'", at)
    if ref is not None and (not isinstance(ref, str) or not ref.strip()):
        raise ComboInvalid(f"{at}.combo_ref must be a combo name", f"{at}.combo_ref")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ComboInvalid(f"{at}.model must be 'provider/model' or a model id", f"{at}.model")
    w = t.get("weight")
    if w is not None and (not _num(w) or not 0 <= w <= 100):
        raise ComboInvalid(f"{at}.weight must be a number from 0 to 100, got {w!r}", f"{at}.weight")
    p = t.get("priority")
    if p is not None and (not isinstance(p, int) or isinstance(p, bool)):
        raise ComboInvalid(f"{at}.priority must be an integer (lower first)", f"{at}.priority")
    if t.get("timeout_s") is not None and t.get("timeout_ms") is not None:
        raise ComboInvalid(f"{at}: give timeout_s or timeout_ms, not both", f"{at}.timeout_ms")
    for key in ("timeout_s", "timeout_ms"):
        v = t.get(key)
        if v is not None and (not _num(v) or v <= 0):
            raise ComboInvalid(f"{at}.{key} must be a positive number", f"{at}.{key}")
    tags = t.get("tags")
    if tags is not None and (not isinstance(tags, list) or not all(isinstance(x, str) for x in tags)):
        raise ComboInvalid(f"{at}.tags must be a list of strings", f"{at}.tags")
    prompt = t.get("prompt")
    if prompt is not None and (not isinstance(prompt, str) or len(prompt) > MAX_STEP_PROMPT_CHARS):
        raise ComboInvalid(
            f"{at}.prompt must be a string of at most {MAX_STEP_PROMPT_CHARS} characters", f"{at}.prompt"
        )
    conn = t.get("connection_id")
    if conn is not None and (not isinstance(conn, str) or not conn):
        raise ComboInvalid(f"{at}.connection_id must be a connection id", f"{at}.connection_id")
    if conn is not None and ref is not None:
        raise ComboInvalid(f"{at}.connection_id is not allowed on a combo_ref target", f"{at}.connection_id")
    if model is not None and reg is not None:
        _catalog_warnings(at, model.strip(), conn, reg, warnings)
    return t


def _warn(warnings: list[dict[str, Any]], code: str, param: str, message: str) -> None:
    warnings.append({"code": code, "param": param, "message": message})


def _catalog_warnings(at: str, model: str, conn: Any, reg: Registry, warnings: list[dict[str, Any]]) -> None:
    cat = reg.catalog
    provider = None
    if "/" in model:
        prefix, rest = model.split("/", 1)
        provider = cat.provider(prefix)
        if provider is None and not cat.providers_serving(model):
            _warn(warnings, "UNKNOWN_PROVIDER", f"{at}.model", f"provider '{prefix}' is not in the catalog")
        elif provider is not None and provider.model(rest) is None:
            _warn(
                warnings, "UNKNOWN_MODEL", f"{at}.model", f"'{rest}' is not a known model of '{provider.id}'"
            )
        if provider is not None and not reg.is_connected(provider.id):
            _warn(
                warnings, "PROVIDER_NOT_CONNECTED", f"{at}.model", f"'{provider.id}' has no active connection"
            )
    elif not cat.providers_serving(model):
        _warn(warnings, "UNKNOWN_MODEL", f"{at}.model", f"no catalog provider lists model '{model}'")
    if conn is not None:
        c = reg.connections_by_id.get(str(conn))
        if c is None:
            _warn(
                warnings, "UNKNOWN_CONNECTION", f"{at}.connection_id", f"connection '{conn}' does not exist"
            )
        elif provider is not None and c.provider != provider.id:
            raise ComboInvalid(
                f"{at}.connection_id '{conn}' belongs to provider '{c.provider}', not '{provider.id}'",
                f"{at}.connection_id",
            )


def _refs(combo: Mapping[str, Any]) -> list[str]:
    return [
        str(t["combo_ref"])
        for t in combo.get("targets") or []
        if isinstance(t, Mapping) and t.get("combo_ref")
    ]


def ref_graph_problem(name: str, graph: Mapping[str, Mapping[str, Any]]) -> str | None:
    """A cycle through ``name`` or a nesting deeper than :data:`MAX_COMBO_DEPTH` on any chain that
    passes through ``name``, as a message; ``None`` when the graph is fine. ``graph`` maps combo
    names to combos (with the candidate ``name`` already in it)."""

    def cycle_from(node: str, path: list[str]) -> list[str] | None:
        for ref in _refs(graph.get(node) or {}):
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

    def longest_down(node: str, seen: frozenset[str]) -> list[str]:
        best: list[str] = []
        for ref in _refs(graph.get(node) or {}):
            if ref in graph and ref not in seen:
                sub = longest_down(ref, seen | {ref})
                if len(sub) + 1 > len(best):
                    best = [ref, *sub]
        return best

    def longest_up(node: str, seen: frozenset[str]) -> list[str]:
        best: list[str] = []
        for other, combo in graph.items():
            if other not in seen and node in _refs(combo):
                sub = longest_up(other, seen | {other})
                if len(sub) + 1 > len(best):
                    best = [*sub, other]
        return best

    chain = [*longest_up(name, frozenset({name})), name, *longest_down(name, frozenset({name}))]
    if len(chain) - 1 > MAX_COMBO_DEPTH:
        return f"combo_ref nesting depth {len(chain) - 1} > {MAX_COMBO_DEPTH}: " + " -> ".join(chain)
    return None


def check_combo(
    data: Mapping[str, Any],
    existing: Iterable[Mapping[str, Any]],
    reg: Registry | None,
    *,
    own_id: str | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Validate and normalise a combo; returns ``(combo, warnings)`` or raises :class:`ComboInvalid`.

    ``existing``: stored combos (the one being edited, ``own_id``, is replaced by ``data``);
    ``reg``: the routing snapshot for catalog warnings (``None`` skips them)."""
    warnings: list[dict[str, Any]] = []
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ComboInvalid("name must be a non-empty string", "name")
    name = name.strip()
    if len(name) > MAX_NAME_CHARS:
        raise ComboInvalid(f"name must be at most {MAX_NAME_CHARS} characters", "name")
    if name.lower().startswith("combo/"):
        raise ComboInvalid("name must not start with 'combo/' (that prefix addresses combos)", "name")
    if not name.isprintable():
        raise ComboInvalid("name must not contain control characters", "name")
    if name.lower() == "auto" or name.lower().startswith("auto/"):
        raise ComboInvalid(
            "name 'auto' and 'auto/…' are reserved for auto routing (AUTO-1); "
            "use strategy 'auto' with another name",
            "name",
        )
    try:
        strategy = canonical_strategy(data.get("strategy", "priority"), strict=True)
    except ValueError as exc:
        raise ComboInvalid(str(exc), "strategy") from None
    raw_targets = data.get("targets")
    if raw_targets is None:
        raw_targets = []
    if not isinstance(raw_targets, list):
        raise ComboInvalid("targets must be a list", "targets")
    cfg = _check_options(data.get("config"))
    if not raw_targets and strategy != "auto":
        what = {
            "fusion": "a fusion panel needs at least 1 member",
            "pipeline": "a pipeline needs at least 1 step",
        }
        raise ComboInvalid(what.get(strategy, "a combo needs at least one target"), "targets")
    targets = [_check_target(i, t, reg, warnings) for i, t in enumerate(raw_targets)]
    if strategy == "fusion":
        tuning = cfg.get("fusionTuning") or {}
        max_panel = (
            tuning.get("maxPanel", DEFAULT_MAX_PANEL) if isinstance(tuning, Mapping) else DEFAULT_MAX_PANEL
        )
        if _num(max_panel) and len(targets) > int(max_panel):
            raise ComboInvalid(
                f"a fusion panel has at most {int(max_panel)} members (maxPanel), got {len(targets)}",
                "targets",
            )
    graph = {str(c.get("name")): c for c in existing if own_id is None or c.get("id") != own_id}
    for i, t in enumerate(targets):
        ref = t.get("combo_ref")
        if ref is not None and ref != name and ref not in graph:
            raise ComboInvalid(f"targets[{i}].combo_ref: no combo named '{ref}'", f"targets[{i}].combo_ref")
    out = {**dict(data), "name": name, "strategy": strategy, "targets": targets, "config": cfg}
    graph[name] = out
    problem = ref_graph_problem(name, graph)
    if problem:
        raise ComboInvalid(problem, "targets")
    return out, warnings
