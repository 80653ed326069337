#!/usr/bin/env bash
# One device call for smddp: build the native backend (with the Lamport kernel), GPU correctness
# tests, then the smddp-vs-NCCL sweep (eager + CUDA graph) and the DDP step benchmark on every GPU
# of the machine (and on 2 of them when there are 4). Usage (repo root):
#   bash benchmarks/smddp_device_suite.sh [quick|full|bench]
# Results (7 files) go to $OUT (the device tool's folder) or ./smddp-results.
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=src PYTHONUNBUFFERED=1 SMDDP_NATIVE_CACHE=${SMDDP_NATIVE_CACHE:-/tmp/smddp-native}
# A Lamport call whose peer never stores traps after this long instead of hanging the run.
export SMDDP_LAMPORT_TIMEOUT_S=${SMDDP_LAMPORT_TIMEOUT_S:-60}
MODE=${1:-full}
OUT=${OUT:-./smddp-results}
mkdir -p "$OUT"
GPUS=$(nvidia-smi -L | wc -l)
nvidia-smi topo -m 2>&1 | head -6
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())"
nvcc --version 2>&1 | tail -1
status=0
t0=$(date +%s)
stamp() { echo "=== $1 at +$(( $(date +%s) - t0 )) s"; }
# Build once up front (the ranks would otherwise wait on the build lock inside a test's timeout).
timeout "${SMDDP_BUILD_TIMEOUT:-180}" python3 -c "
import logging, time; logging.basicConfig(level=logging.INFO)
t = time.time()
from smdist_launcher.smddp import native_backend as nb
m = nb.load()
print('native backend:', m is not None, 'lamport kernel:', getattr(m, 'LAMPORT', None), nb.unavailable_reason(),
      f'{time.time() - t:.0f} s')
" 2>&1 | tail -40 || status=1
stamp built
if [ "$MODE" != bench ]; then
  timeout "${SMDDP_TEST_TIMEOUT:-150}" python3 -m pytest tests/smddp/test_process_group.py -m gpu -q \
    -p no:cacheprovider -x -k "${SMDDP_TEST_FILTER:-gpu}" 2>&1 | tail -60 | tee "$OUT/gpu_tests.log" || status=1
  stamp tested
fi
quick=""
[ "$MODE" = quick ] && quick="--quick"
for n in $(echo "$GPUS 2" | tr ' ' '\n' | sort -u); do
  [ "$n" -gt "$GPUS" ] && continue
  devs=$(seq -s, 0 $((n - 1)))
  # the forced Lamport column runs up to 64 MiB
  CUDA_VISIBLE_DEVICES=$devs SMDDP_LAMPORT_BYTES=$((64 << 20)) timeout "${SMDDP_BENCH_TIMEOUT:-200}" \
    python3 -m torch.distributed.run --nproc_per_node="$n" \
    benchmarks/collectives.py --no-gemm --out "$OUT/bench$n.json" $quick > "$OUT/bench$n.log" 2>&1 \
    || { status=1; tail -30 "$OUT/bench$n.log"; }
  stamp "bench $n"
  for model in "1024 20" "256 8"; do
    set -- $model
    CUDA_VISIBLE_DEVICES=$devs timeout "${SMDDP_DDP_TIMEOUT:-75}" python3 -m torch.distributed.run \
      --nproc_per_node="$n" benchmarks/smddp_ddp_step.py --hidden "$1" --layers "$2" --rounds 11 --steps 40 \
      --out "$OUT/ddp${n}_$1x$2.json" >> "$OUT/ddp.log" 2>&1 || { status=1; tail -20 "$OUT/ddp.log"; }
  done
  stamp "ddp $n"
done
python3 benchmarks/collectives.py --summarize "$OUT"/bench*.json | tee "$OUT/summary.md"
cat "$OUT"/ddp*.json 2>/dev/null
exit $status
