#!/usr/bin/env bash
# One device call for smddp: build the native backend (with the Lamport kernel), GPU correctness
# tests, then the smddp-vs-NCCL sweep (eager + CUDA graph) and the DDP step benchmark on every GPU
# of the machine (and on 2 of them when there are 4). Usage (repo root):
#   bash benchmarks/smddp_device_suite.sh [quick|full|bench|focus|fsdp]
# Results (7 files) go to $OUT (the device tool's folder) or ./smddp-results.
# focus: build, every GPU test of tests/smddp, the copy-engine AllGather pipelined in 1/2/4/8 parts
# vs NCCL (32 MiB-1 GiB), the DDP step of both models (every variant, rotated rounds) and the FSDP2
# 1.3B step of benchmarks/smp_throughput.py over NCCL and over smddp (SMDDP_CE_CHUNKS = the
# AllGather probe's best), on 2 GPUs; 8 files.
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
if [ "$MODE" = fsdp ]; then
  # fsdp: build, the FSDP2 1.3B step over smddp against NCCL in one process per GPU (rounds
  # alternated, the AllGather-forced-to-NCCL noise floor; SMDDP_FSDP_VARIANTS adds smddp_c1,smddp_c2), the
  # 2-GPU GPU tests.
  export CUDA_VISIBLE_DEVICES=0,1
  timeout "${SMDDP_FSDP_TIMEOUT:-110}" python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
    benchmarks/smddp_fsdp2_step.py --rounds "${SMDDP_FSDP_ROUNDS:-16}" --steps 3 \
    --variants "${SMDDP_FSDP_VARIANTS:-nccl,smddp,smddp_ag_nccl}" --out "$OUT/fsdp2_step.json" \
    2>&1 | grep -v "^W1\|OMP_NUM\|^\*\*\*" | tail -25 || status=1
  stamp fsdp2
  timeout "${SMDDP_TEST_TIMEOUT:-90}" python3 -m pytest tests/smddp/test_process_group.py -m gpu -q -x \
    -p no:cacheprovider -k "test_gpu_matches_nccl and 2" 2>&1 | tail -40 | tee "$OUT/gpu_tests.log" || status=1
  stamp tested
  exit $status
fi
if [ "$MODE" = focus ]; then
  export CUDA_VISIBLE_DEVICES=0,1
  timeout 120 python3 -m torch.distributed.run --nproc_per_node=2 benchmarks/collectives.py --ag-pipeline \
    --out "$OUT/ag_pipeline.json" 2>&1 | grep -v "^W1\|OMP_NUM\|^\*\*\*" | tail -20 || status=1
  python3 benchmarks/collectives.py --summarize "$OUT/ag_pipeline.json" | tee "$OUT/summary.md"
  stamp "ag pipeline"
  for model in "1024 20" "256 8"; do
    set -- $model
    timeout 90 python3 -m torch.distributed.run --nproc_per_node=2 benchmarks/smddp_ddp_step.py --hidden "$1" \
      --layers "$2" --rounds 21 --steps 20 --out "$OUT/ddp2_$1x$2.json" 2>&1 | grep "^{\|Error\|error" || status=1
  done
  stamp ddp
  # the AllGather pipeline depth that measured best at 64-256 MiB (geometric mean of the ratios to NCCL)
  chunks=$(python3 - "$OUT/ag_pipeline.json" <<'PY'
import json, math, sys
rows = [r for r in json.load(open(sys.argv[1]))["ag_pipeline"] if 64 << 20 <= r["bytes"] <= 256 << 20]
score = {k: math.prod(r["busbw_" + k] / r["busbw_nccl"] for r in rows) for k in ("ce", "ce:c2", "ce:c4", "ce:c8")}
print({"ce": 1, "ce:c2": 2, "ce:c4": 4, "ce:c8": 8}[max(score, key=score.get)])
PY
) || chunks=1
  echo "SMDDP_CE_CHUNKS=$chunks for the FSDP2 run" | tee -a "$OUT/summary.md"
  for backend in nccl smddp; do
    SMDDP_CE_CHUNKS=$chunks timeout 100 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
      benchmarks/smp_throughput.py --only '1.3b:fsdp2$' --steps 10 --backend $backend --out "/tmp/fsdp_$backend" \
      2>&1 | grep -v "^W1\|OMP_NUM\|^\*\*\*" | tail -3 || status=1
    cp "/tmp/fsdp_$backend/results.jsonl" "$OUT/fsdp2_1.3b_$backend.jsonl" 2>/dev/null
  done
  stamp fsdp2
  timeout "${SMDDP_TEST_TIMEOUT:-150}" python3 -m pytest tests/smddp/test_process_group.py -m gpu -q \
    -p no:cacheprovider 2>&1 | tail -40 | tee "$OUT/gpu_tests.log" || status=1
  stamp tested
  exit $status
fi
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
