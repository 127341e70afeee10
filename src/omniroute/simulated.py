"""Built-in simulated providers for ``omniroute serve`` with no configuration and ``omniroute demo``
(OPS-1): real local HTTP servers from :mod:`omniroute.testing`, so the gateway answers at once with no
keys and no network. Every simulated provider and model is labelled ``simulated``.

The fault grammar of :mod:`omniroute.testing` works through them too: ``sim-fast/fast-1+chunks-10``
streams ten chunks, ``sim-fast/fast-1+fail-503`` fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from omniroute.core.combo import Combo, ComboTarget
from omniroute.values import Connection, ModelInfo, ProviderInfo

if TYPE_CHECKING:
    from omniroute.store import Store

# (provider id, model id, input price, output price USD per 1M, context, max output, capabilities, tier)
SIMULATED_MODELS: tuple[tuple[str, str, float, float, int, int, tuple[str, ...], str], ...] = (
    ("sim-fast", "fast-1", 0.10, 0.40, 128_000, 16_384, ("tools",), "standard"),
    ("sim-cheap", "cheap-1", 0.02, 0.08, 32_000, 4_096, (), "free"),
    (
        "sim-smart",
        "smart-1",
        3.00,
        15.00,
        200_000,
        32_000,
        ("tools", "vision", "reasoning", "structured_output"),
        "premium",
    ),
)
SAMPLE_COMBO = "sim-combo"
SIMULATED_PROVIDER_IDS: frozenset[str] = frozenset(pid for pid, *_ in SIMULATED_MODELS)


def simulated_providers(base_urls: Mapping[str, str] | None = None) -> list[ProviderInfo]:
    """Catalog entries of the simulated providers; ``base_urls`` by provider id (default a placeholder
    on 127.0.0.1, for checking references before the servers run)."""
    urls = base_urls or {}
    return [
        ProviderInfo(
            id=pid,
            format="openai",
            base_url=urls.get(pid, "http://127.0.0.1/v1"),
            name=f"{pid} (simulated)",
            models=(ModelInfo(mid, pin, pout, ctx, mo, frozenset(caps), tier, name=f"{mid} (simulated)"),),
            simulated=True,
        )
        for pid, mid, pin, pout, ctx, mo, caps, tier in SIMULATED_MODELS
    ]


class SimulatedFleet:
    """Three fake OpenAI-format providers on 127.0.0.1 plus their connections and a sample combo."""

    def __init__(self) -> None:
        from omniroute.testing.fake_provider import FakeProvider  # loaded only when simulating

        self._servers = {pid: FakeProvider(name=pid) for pid, *_ in SIMULATED_MODELS}

    @property
    def provider_ids(self) -> list[str]:
        return list(self._servers)

    async def start(self) -> None:
        for fp in self._servers.values():
            await fp.start()

    async def stop(self) -> None:
        for fp in self._servers.values():
            await fp.stop()

    @property
    def providers(self) -> list[ProviderInfo]:
        """Catalog entries of the simulated providers (base URLs of the running servers)."""
        return simulated_providers({pid: f"{fp.base_url}/v1" for pid, fp in self._servers.items()})

    def connections(self) -> list[Connection]:
        """One connection per simulated provider (never stored)."""
        return [
            Connection(
                id=f"{pid}-key",
                provider=pid,
                name="simulated",
                api_key="sim",
                default_model=mid,
                priority=i + 1,
            )
            for i, (pid, mid, *_) in enumerate(SIMULATED_MODELS)
        ]

    @staticmethod
    def sample_combo() -> Combo:
        """A priority combo over the simulated providers, shown in the demo's curl line."""
        return Combo(
            name=SAMPLE_COMBO,
            description="simulated sample combo",
            targets=(
                ComboTarget(model="sim-smart/smart-1"),
                ComboTarget(model="sim-fast/fast-1"),
                ComboTarget(model="sim-cheap/cheap-1"),
            ),
        )


def routes_only_to_simulated(combo: Combo) -> bool:
    """Whether every target of ``combo`` is a simulated ``provider/model`` (no combo refs): such a combo
    is labelled ``simulated`` where it is listed."""
    return bool(combo.targets) and all(
        t.model is not None and t.model.partition("/")[0] in SIMULATED_PROVIDER_IDS for t in combo.targets
    )


def is_sample_combo(row: Mapping[str, Any]) -> bool:
    """Whether a stored combo row is the sample combo as simulated mode wrote it, or an edit of it that
    still routes only to simulated providers (so it would dangle once they are off): named
    :data:`SAMPLE_COMBO`, with no ``combo_ref`` and every target a ``sim-…/model`` id."""
    if row.get("name") != SAMPLE_COMBO:
        return False
    targets = row.get("targets") or ()
    for t in targets:
        model = t if isinstance(t, str) else t.get("model") if isinstance(t, Mapping) else None
        if not isinstance(model, str) or model.partition("/")[0] not in SIMULATED_PROVIDER_IDS:
            return False
    return bool(targets)


async def store_sample_combo(store: Store) -> bool:
    """Store the sample combo unless a combo of that name exists, so ``/api/combos`` and ``omniroute
    combos list`` show it like any other; ``True`` when it was written now."""
    if await store.get_combo(SAMPLE_COMBO) is not None:
        return False
    await store.upsert_combo_by_name(SimulatedFleet.sample_combo().to_json())
    return True


async def retire_sample_combo(store: Store) -> bool:
    """Delete the stored sample combo when it still routes only to simulated providers (see
    :func:`is_sample_combo`): real connections switched them off and it would only dangle. A combo of
    that name the operator pointed elsewhere is kept. ``True`` when a combo was deleted."""
    row = await store.get_combo(SAMPLE_COMBO)
    if row is None or not is_sample_combo(row):
        return False
    return await store.delete_combo(str(row["id"]))
