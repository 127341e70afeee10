"""Every module imports on its own, whatever was imported before it.

The test process imports the whole package early, which hides an import cycle that only bites when a
command imports one module first (``omniroute combos create`` once failed with "cannot import name
'expand_targets' from partially initialized module"). Here each module is imported in a clean
interpreter state of its own package.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import omniroute

SCRIPT = """
import importlib, sys
failures = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "omniroute" or m.startswith("omniroute.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:  # report every module that cannot be imported first
        failures.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failures))
sys.exit(1 if failures else 0)
"""


def _modules() -> list[str]:
    skip = ("omniroute.testing", "omniroute.state.redis")  # test tooling; optional client library
    return [
        m.name
        for m in pkgutil.walk_packages(omniroute.__path__, "omniroute.")
        if not m.name.startswith(skip)
        and not m.name.startswith("omniroute.store.migrations")
        and not m.name.endswith("__main__")  # runs the CLI
    ]


def test_every_module_imports_first_without_an_import_cycle() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, *_modules()], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
