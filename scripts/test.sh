#!/usr/bin/env bash
# The full test suite, exactly as the README's second quick-start command runs it:
# creates .venv, installs the package with its test extras, builds llama.cpp's llama-server and fetches
# the SmolLM2 model once into ~/.cache/omniroute/llama (reused afterwards), installs the coding-agent
# clients the agent tests drive once into ~/.cache/omniroute/agents (a client that cannot be installed
# only skips its tests), then lint, types and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
OMNIROUTE_LLAMA_CACHE="$(PYTHON=.venv/bin/python scripts/build-llama-server.sh | tail -n 1)"
export OMNIROUTE_LLAMA_CACHE
OMNIROUTE_AGENTS_CACHE="$(scripts/install-agents.sh | tail -n 1)"
export OMNIROUTE_AGENTS_CACHE
echo "== ruff"; .venv/bin/ruff check src tests bench
echo "== import layers"; .venv/bin/lint-imports --no-cache
echo "== mypy"; .venv/bin/mypy
echo "== pytest"; .venv/bin/pytest -q -p no:cacheprovider "$@"
