#!/usr/bin/env bash
# One device call for smddp: GPU correctness tests on 2 and 4 GPUs, then the smddp-vs-NCCL
# sweep on 4 and 2 GPUs. Usage (repo root): bash benchmarks/smddp_device_suite.sh [quick|full|bench]
# Results go to $OUT (the device tool's folder) or ./smddp-results.
set -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=src PYTHONUNBUFFERED=1 SMDDP_NATIVE_CACHE=/tmp/smddp-native
MODE=${1:-full}
OUT=${OUT:-./smddp-results}
mkdir -p "$OUT"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())"
status=0
if [ "$MODE" != bench ]; then
  timeout 150 python3 -m pytest tests/smddp/test_process_group.py -m gpu -q -p no:cacheprovider -x -o timeout=70 2>&1 | tail -60 | tee "$OUT/gpu_tests.log" || status=1
fi
quick=""
[ "$MODE" = quick ] && quick="--quick"
timeout 240 python3 -m torch.distributed.run --nproc_per_node=4 benchmarks/collectives.py --out "$OUT/bench4.json" $quick > "$OUT/bench4.log" 2>&1 || { status=1; tail -30 "$OUT/bench4.log"; }
if [ "$MODE" != quick ]; then
  CUDA_VISIBLE_DEVICES=0,1 timeout 150 python3 -m torch.distributed.run --nproc_per_node=2 benchmarks/collectives.py --out "$OUT/bench2.json" > "$OUT/bench2.log" 2>&1 || { status=1; tail -30 "$OUT/bench2.log"; }
fi
python3 benchmarks/collectives.py --summarize "$OUT"/bench*.json
cat "$OUT/topo.txt" | head -8
exit $status
