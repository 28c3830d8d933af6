#!/usr/bin/env bash
# Builds raw llama.cpp, our reference for fixtures and benchmarks, natively for this CPU
# (GGML_NATIVE=ON) from the copy vendored in PyPI's llama-cpp-python sdist (pinned, SHA-256
# checked). cmake and ninja come from PyPI wheels into a private venv if the machine lacks them.
# Everything lands under .cache/llama.cpp (ignored); prints the bin folder on stdout. Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sdist() { node -p "require('$root/scripts/llamaCppSdist.json').$1"; }
VERSION=$(sdist version)
SHA256=$(sdist sha256)
URL=$(sdist url)
TOOLS=(llama-quantize llama-bench llama-batched-bench llama-server llama-eval-callback llama-simple llama-tokenize)

work=$root/.cache/llama.cpp
bin=$work/build/bin
log() { echo "build-llama-cpp: $*" >&2; }

if [ -x "$bin/llama-logits" ] && [ "$bin/llama-logits" -nt "$root/scripts/llama-logits.cpp" ] && [ -f "$work/build/.version-$VERSION" ]; then echo "$bin"; exit 0; fi
mkdir -p "$work"
tarball=$work/llama_cpp_python-$VERSION.tar.gz
if [ ! -f "$tarball" ] || ! echo "$SHA256  $tarball" | sha256sum -c --status; then
  log "downloading llama-cpp-python $VERSION sdist ..."
  curl -sSfL --retry 3 -o "$tarball.part" "$URL"
  echo "$SHA256  $tarball.part" | sha256sum -c --status || { log "checksum mismatch for $URL"; exit 1; }
  mv "$tarball.part" "$tarball"
fi
src=$work/llama_cpp_python-$VERSION
[ -d "$src/vendor/llama.cpp" ] || tar -xzf "$tarball" -C "$work"

if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
  if [ ! -x "$work/venv/bin/cmake" ] || [ ! -x "$work/venv/bin/ninja" ]; then
    log "installing cmake and ninja from PyPI into $work/venv ..."
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" install --quiet --only-binary :all: cmake ninja
  fi
  export PATH=$work/venv/bin:$PATH
fi

log "configuring (GGML_NATIVE=ON) ..."
cmake -S "$src/vendor/llama.cpp" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DBUILD_SHARED_LIBS=OFF >&2
log "building ${TOOLS[*]} (several minutes on 2 cores) ..."
cmake --build "$work/build" --target "${TOOLS[@]}" -j "$(nproc)" >&2
log "linking our probe llama-logits ..."
b=$work/build
${CXX:-c++} -O2 -std=c++17 -I"$src/vendor/llama.cpp/include" -I"$src/vendor/llama.cpp/ggml/include" "$root/scripts/llama-logits.cpp" \
  -o "$bin/llama-logits" "$b/src/libllama.a" "$b/ggml/src/libggml.a" "$b/ggml/src/libggml-cpu.a" "$b/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl
touch "$work/build/.version-$VERSION"
echo "$bin"
