#!/usr/bin/env bash
# The whole GPU check in one command, for a machine with an NVIDIA GPU and no Rust toolchain:
# the kernel-vs-CPU-reference and greedy-tokens tests, our bench, PyTorch on the same shapes,
# and a markdown summary for BENCHMARKS.md. Everything lands in $OUT (default ./gpu-check-out).
#
#   node scripts/build-cuda.mjs --tests-only     # here: .cache/cuda/gpu-check/{cuda-tests,cuda_bench}
#                                                # and the same packed as .cache/cuda/gpu-check.tar.xz (~7 MB)
#   scripts/gpu-check.sh [.cache/cuda/gpu-check.tar.xz | .cache/cuda/gpu-check]   # there
#
# Needs CUDA 13 runtime libraries (cudart, cuBLAS, cuRAND, NVRTC); found in the nvidia PyPI
# wheels of the Python that has torch, or in /usr/local/cuda.
set -uo pipefail
bin=${1:-.cache/cuda/gpu-check.tar.xz}
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
# The binaries travel packed: unpacked they are near the 64 MiB a device call may carry.
if [ -f "$bin" ]; then
  mkdir -p /tmp/kvengine-gpu-check && tar -xJf "$bin" -C /tmp/kvengine-gpu-check && bin=/tmp/kvengine-gpu-check/gpu-check
fi
here=$(cd "$(dirname "$0")" && pwd)

libs=$(python3 -c 'import nvidia, os; print(":".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2>/dev/null || true)
export LD_LIBRARY_PATH="${libs:+$libs:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-$(nproc)}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  ldd "$bin/cuda-tests" | grep -E 'cuda|cublas|curand|nvrtc|not found'
} | tee "$out/environment.txt"

status=0
echo "== tests: kernel vs CPU reference, greedy tokens GPU vs CPU"
"$bin/cuda-tests" --test-threads=1 --nocapture 2>&1 | tee "$out/tests.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== bench: kvengine"
"$bin/cuda_bench" 2>&1 | tee "$out/bench.jsonl"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  echo "== bench: PyTorch SDPA and Hugging Face Llama on the same shapes"
  PYTHONUNBUFFERED=1 python3 "$here/gpu_bench_torch.py" 2>"$out/torch.stderr" | tee "$out/torch.jsonl"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "torch with CUDA is not importable here; PyTorch figures skipped" | tee "$out/torch.jsonl"
fi

python3 "$here/gpu_report.py" "$out" | tee "$out/BENCHMARKS-gpu.md"
echo "gpu-check: exit $status (figures in $out)"
exit $status
