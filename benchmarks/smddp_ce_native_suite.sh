#!/usr/bin/env bash
# Issue 31, the copy-engine AllGather issued whole by the native backend: ONE device call on 2 GPUs.
#   bash benchmarks/smddp_ce_native_suite.sh        (repo root; results under $OUT or ./smddp-results)
# build (with the Lamport kernel and the native copy-engine path) -> AllGather bf16 32 MiB-1 GiB against
# NCCL in the same run (the engine's default parts, and one part) with the C++ host time per call ->
# the FSDP2 1.3B step (nccl / smddp / smddp with its AllGather on NCCL, rotated rounds) -> every GPU test
# of tests/smddp (all in test_process_group.py). A timeout on every step.
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=src PYTHONUNBUFFERED=1 SMDDP_NATIVE_CACHE=${SMDDP_NATIVE_CACHE:-/tmp/smddp-native}
export SMDDP_LAMPORT_TIMEOUT_S=${SMDDP_LAMPORT_TIMEOUT_S:-60} CUDA_VISIBLE_DEVICES=0,1
OUT=${OUT:-./smddp-results}
mkdir -p "$OUT"
status=0
t0=$(date +%s)
stamp() { echo "=== $1 at +$(( $(date +%s) - t0 )) s"; }
drop() { grep -v "^W1\|OMP_NUM\|^\*\*\*"; }
nvidia-smi -L
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
timeout "${SMDDP_BUILD_TIMEOUT:-150}" python3 -c "
import logging, time; logging.basicConfig(level=logging.INFO)
t = time.time()
from smdist_launcher.smddp import native_backend as nb
m = nb.load()
print('native backend:', m is not None, 'lamport:', getattr(m, 'LAMPORT', None), 'ce native:',
      getattr(m, 'CE_NATIVE', None), nb.unavailable_reason(), f'{time.time() - t:.0f} s')
" 2>&1 | tail -30 || status=1
stamp built
timeout "${SMDDP_AG_TIMEOUT:-90}" python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
  benchmarks/collectives.py --ag-pipeline --ag-variants ce:default,ce --ag-dtypes bfloat16 \
  --out "$OUT/ag_native.json" 2>&1 | drop | tail -12 || status=1
python3 benchmarks/collectives.py --summarize "$OUT/ag_native.json" | tee "$OUT/summary.md"
stamp "ag bench"
timeout "${SMDDP_FSDP_TIMEOUT:-110}" python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
  benchmarks/smddp_fsdp2_step.py --rounds "${SMDDP_FSDP_ROUNDS:-24}" --steps 3 \
  --variants nccl,smddp,smddp_ag_nccl --out "$OUT/fsdp2_step.json" 2>&1 | drop | tail -6 || status=1
stamp fsdp2
timeout "${SMDDP_TEST_TIMEOUT:-150}" python3 -m pytest tests/smddp/test_process_group.py -m gpu -q -p no:cacheprovider 2>&1 \
  | tail -60 > "$OUT/gpu_tests.log" || status=1
tail -25 "$OUT/gpu_tests.log"
stamp tested
exit $status
