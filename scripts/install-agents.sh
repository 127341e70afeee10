#!/usr/bin/env bash
# Installs the coding-agent clients the end-to-end agent tests drive, once, into a cache folder outside
# the repository (reused afterwards): Claude Code, Codex CLI, Gemini CLI and opencode from npm into
# CACHE/npm, `llm` and aider from PyPI each into a venv of its own (CACHE/llm, CACHE/aider), so their
# dependencies never enter the project's venv. Pinned versions; a client whose install or `--version`
# check fails is written to CACHE/status/<client> as "failed: <why>" and the script goes on (the tests
# for that client skip with that reason). Prints the cache folder on its last line.
#
# Usage: scripts/install-agents.sh     (cache: ${OMNIROUTE_AGENTS_CACHE:-~/.cache/omniroute/agents})
# npm 11 runs no dependency install scripts unless allowed, so the two that matter are run by hand:
# Claude Code's postinstall puts its native binary in place, opencode's picks its platform binary.
set -uo pipefail
CACHE="${OMNIROUTE_AGENTS_CACHE:-$HOME/.cache/omniroute/agents}"
PY="${PYTHON:-python3}"
CLAUDE_CODE_VERSION=2.1.332
CODEX_VERSION=0.171.0
GEMINI_CLI_VERSION=0.61.0
OPENCODE_VERSION=1.18.33
LLM_VERSION=0.36
AIDER_VERSION=0.86.2
mkdir -p "$CACHE/status"

# record CLIENT EXPECTED-VERSION COMMAND...: "ok VERSION" when COMMAND's output names the version.
record() {
  local client="$1" version="$2" out
  shift 2
  if out=$(timeout 120 "$@" 2>&1) && grep -qF -- "$version" <<<"$out"; then
    echo "ok $version" >"$CACHE/status/$client"
  else
    echo "failed: \`$* \` printed: $(tail -c 300 <<<"$out" | tr '\n' ' ')" >"$CACHE/status/$client"
  fi
  echo "[agents] $client: $(cat "$CACHE/status/$client")" >&2
}

fail_all() {
  local why="$1"
  shift
  for client in "$@"; do echo "failed: $why" >"$CACHE/status/$client"; done
  echo "[agents] $*: failed: $why" >&2
}

npm_clients() {
  local dir="$CACHE/npm" wanted
  wanted=$(printf '{"private": true, "dependencies": {"@anthropic-ai/claude-code": "%s", "@openai/codex": "%s", "@google/gemini-cli": "%s", "opencode-ai": "%s"}}\n' \
    "$CLAUDE_CODE_VERSION" "$CODEX_VERSION" "$GEMINI_CLI_VERSION" "$OPENCODE_VERSION")
  mkdir -p "$dir"
  if ! command -v npm >/dev/null; then
    fail_all "npm is not installed" claude codex gemini opencode
    return
  fi
  if [ "$(cat "$dir/package.json" 2>/dev/null)" != "$wanted" ] || [ ! -f "$dir/.installed" ]; then
    echo "[agents] npm install (Claude Code, Codex CLI, Gemini CLI, opencode)" >&2
    rm -f "$dir/.installed"
    echo "$wanted" >"$dir/package.json"
    if ! (cd "$dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error >"$CACHE/npm-install.log" 2>&1); then
      fail_all "npm install failed: $(tail -c 300 "$CACHE/npm-install.log" | tr '\n' ' ')" claude codex gemini opencode
      return
    fi
    (cd "$dir/node_modules/@anthropic-ai/claude-code" && node install.cjs) >>"$CACHE/npm-install.log" 2>&1
    (cd "$dir/node_modules/opencode-ai" && node postinstall.mjs) >>"$CACHE/npm-install.log" 2>&1
    touch "$dir/.installed"
  fi
  local bin="$dir/node_modules/.bin"
  record claude "$CLAUDE_CODE_VERSION" "$bin/claude" --version
  record codex "$CODEX_VERSION" "$bin/codex" --version
  record gemini "$GEMINI_CLI_VERSION" "$bin/gemini" --version
  record opencode "$OPENCODE_VERSION" "$bin/opencode" --version
}

# python_client CLIENT PACKAGE VERSION: a venv CACHE/CLIENT with PACKAGE==VERSION.
python_client() {
  local client="$1" package="$2" version="$3" venv="$CACHE/$1"
  if [ ! -x "$venv/bin/$client" ] || ! grep -qxF "$version" "$venv/.installed" 2>/dev/null; then
    echo "[agents] pip install $package==$version (own venv)" >&2
    rm -rf "$venv"
    if ! { "$PY" -m venv "$venv" && "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "$package==$version"; } >"$CACHE/$client-install.log" 2>&1; then
      fail_all "pip install $package==$version failed: $(grep -v '^WARNING' "$CACHE/$client-install.log" | tail -c 300 | tr '\n' ' ')" "$client"
      return
    fi
    echo "$version" >"$venv/.installed"
  fi
  record "$client" "$version" "$venv/bin/$client" --version
}

npm_clients
python_client llm llm "$LLM_VERSION"
python_client aider aider-chat "$AIDER_VERSION"
echo "$CACHE"
