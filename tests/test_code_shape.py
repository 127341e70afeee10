"""The codebase stays in pieces a person can hold: no module of the product over 800 lines (functions
over cyclomatic complexity 15 are refused by ruff's C901 rule in the same CI run)."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "omniroute"
MAX_MODULE_LINES = 800


def test_no_module_is_over_800_lines() -> None:
    sizes = {
        p.relative_to(SRC).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
        for p in SRC.rglob("*.py")
    }
    assert len(sizes) > 100
    too_long = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not too_long, f"split these modules into packages: {too_long}"
