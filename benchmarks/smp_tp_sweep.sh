#!/usr/bin/env bash
# Issue 30's tensor-parallel sweep in one device call on 2 GPUs (each step under `timeout`), results under $OUT:
#   1.3B seq 2048, global batch 8: plain FSDP2; TP 2 with the defaults before the second round ("prev"), with each
#   change added in turn (+fastlocal, +unitdp), the defaults, the defaults with what did not pay (+regather, +async,
#   +async+regather) and without unit_dp (-unitdp); every case profiled one step;
#   the GPU exactness test of every TPOptions switch (tests/smp/test_tp_gpu.py; async TP is CUDA only);
#   6.7B seq 8192, global batch 2: FSDP2 + AC, TP 2 + AC (defaults, with async TP), TP 2 without AC (OOM recorded);
#   then AWS's script flow (tests/smp/hf_aws_worker.py) for GPT-NeoX and Llama+LlamaFlashAttention.
# Run from the repo root: bash benchmarks/smp_tp_sweep.sh   (BENCH13_S / GPUTEST_S / BENCH67_S / HF_S bound each part)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD/src:$PWD/src/smdist_launcher/compat/site${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-./smp-tp-sweep}
mkdir -p "$OUT/bench"
PY=${PYTHON:-python3}
R2=("$PY" -m torch.distributed.run --standalone --nproc-per-node 2)
$PY -c "import torch, datetime; print('date', datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
'torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())), 'gpus',
torch.cuda.device_count(), torch.cuda.get_device_name(0))" 2>&1 | tee "$OUT/env.txt"
t0=$SECONDS
timeout -k 10 "${BENCH13_S:-150}" "${R2[@]}" benchmarks/smp_throughput.py --out "$OUT/bench" --profile \
  --only "${BENCH13_ONLY:-1.3b:fsdp2\$,1.3b:smp tp2 prev,1.3b:smp tp2 +fastlocal,1.3b:smp tp2 +unitdp,1.3b:smp tp2\$,1.3b:smp tp2 -,1.3b:smp tp2 +r,1.3b:smp tp2 +a}" \
  > "$OUT/bench13.log" 2>&1
echo "1.3b part: exit $? after $((SECONDS - t0))s" | tee -a "$OUT/env.txt"
t0=$SECONDS
timeout -k 5 "${GPUTEST_S:-70}" "$PY" -m pytest -q -p no:cacheprovider tests/smp/test_tp_gpu.py > "$OUT/gpu_test.log" 2>&1
echo "gpu test: exit $? after $((SECONDS - t0))s: $(tail -1 "$OUT/gpu_test.log")" | tee -a "$OUT/env.txt"
t0=$SECONDS
timeout -k 10 "${BENCH67_S:-110}" "${R2[@]}" benchmarks/smp_throughput.py --out "$OUT/bench" --warmup 1 --steps 3 \
  --only "${BENCH67_ONLY:-6.7b:fsdp2+ac s8k,6.7b:smp tp2+ac s8k,6.7b:smp tp2+ac+async s8k,6.7b:smp tp2 s8k}" \
  > "$OUT/bench67.log" 2>&1
echo "6.7b part: exit $? after $((SECONDS - t0))s" | tee -a "$OUT/env.txt"
t0=$SECONDS
for model in ${HF_MODELS:-neox llama-flash}; do
  args=(--model "${model%-flash}")
  [ "$model" = llama-flash ] && args+=(--flash)
  timeout -k 5 "${HF_S:-35}" "${R2[@]}" tests/smp/hf_aws_worker.py "${args[@]}" \
    --matrix "${HF_MATRIX:-tp2-fsdp2,tp2-fsdp2-delayed,tp2-fsdp1,tp2-fsdp1-orig,tp2-fsdp1-reentrant}" \
    > "$OUT/hf_$model.log" 2>&1
  echo "hf $model: exit $? $(grep -c '"ok": true' "$OUT/hf_$model.log") ok $(grep -c '"ok": false' "$OUT/hf_$model.log") failed" \
    | tee -a "$OUT/env.txt"
done
echo "hf part: $((SECONDS - t0))s" | tee -a "$OUT/env.txt"
grep -h "tok/s/GPU\|OOM\|Error" "$OUT/bench13.log" "$OUT/bench67.log" | sort -u | tee "$OUT/summary.txt"
