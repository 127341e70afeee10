"""Which variant strings a simulation can run: shared by ``omniroute simulate --compare`` and the
console's Simulate page, so both refuse an unknown variant before replaying anything."""

from __future__ import annotations

from collections.abc import Collection

from omniroute.errors import GatewayError


class UnknownVariant(ValueError):
    """A variant no run can use; ``variant`` is the string, ``reason`` says why (lists the choices).
    ``str()`` is ``"variant '<variant>': <reason>"``."""

    def __init__(self, variant: str, reason: str) -> None:
        self.variant = variant
        self.reason = reason
        super().__init__(f"variant {variant!r}: {reason}")


def check_variant(variant: str, pool: tuple[str, ...], combos: Collection[str]) -> None:
    """Raise :class:`UnknownVariant` unless ``variant`` is a registered combo strategy, a valid auto id,
    a ``provider/model`` of the fleet's ``pool`` or a combo of the fleet's config (what
    :func:`omniroute.simulate.run.variant_config` can run; anything else would fail every request)."""
    from omniroute.routing.auto.variants import parse_auto_id
    from omniroute.routing.strategies.registry import strategy_names

    if variant in strategy_names() or variant in pool or variant in combos:
        return
    if variant.lower().startswith("auto"):
        try:
            parse_auto_id(variant)
        except GatewayError as exc:
            raise UnknownVariant(variant, exc.message) from None
        return
    known = ", ".join([*strategy_names(), *pool])
    raise UnknownVariant(
        variant, f"not a combo strategy, auto variant or model of the scenario (one of: {known})"
    )


__all__ = ["UnknownVariant", "check_variant"]
