"""Built-in simulated providers for ``omniroute serve`` with no configuration and ``omniroute demo``
(OPS-1): real local HTTP servers from :mod:`omniroute.testing`, so the gateway answers at once with no
keys and no network. Every simulated provider and model is labelled ``simulated``.

The fault grammar of :mod:`omniroute.testing` works through them too: ``sim-fast/fast-1+chunks-10``
streams ten chunks, ``sim-fast/fast-1+fail-503`` fails.
"""

from __future__ import annotations

from omniroute.core.combo import Combo, ComboTarget
from omniroute.values import Connection, ModelInfo, ProviderInfo

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
        out = []
        for pid, mid, pin, pout, ctx, mo, caps, tier in SIMULATED_MODELS:
            out.append(
                ProviderInfo(
                    id=pid,
                    format="openai",
                    base_url=f"{self._servers[pid].base_url}/v1",
                    name=f"{pid} (simulated)",
                    models=(
                        ModelInfo(mid, pin, pout, ctx, mo, frozenset(caps), tier, name=f"{mid} (simulated)"),
                    ),
                    simulated=True,
                )
            )
        return out

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
