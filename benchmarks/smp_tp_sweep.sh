#!/usr/bin/env bash
# Issue 30's tensor-parallel sweep in one device call on 2 GPUs (each step under `timeout`), results under $OUT:
#   1.3B seq 2048, global batch 8: plain FSDP2; TP 2 as it was ("base": both local_modules.TPOptions off), with
#   each change alone, with both (the default); every case profiled one step;
#   6.7B seq 8192, global batch 2: FSDP2 + AC, TP 2 + AC, TP 2 (OOM recorded as such);
#   then AWS's script flow (tests/smp/hf_aws_worker.py) for GPT-NeoX and Llama+LlamaFlashAttention, every mode.
# Run from the repo root: bash benchmarks/smp_tp_sweep.sh   (BENCH13_S / BENCH67_S / HF_S bound each part)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD/src:$PWD/src/smdist_launcher/compat/site${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-./smp-tp-sweep}
mkdir -p "$OUT/bench"
PY=${PYTHON:-python3}
R2=("$PY" -m torch.distributed.run --standalone --nproc-per-node 2)
$PY -c "import torch; print('date', __import__('datetime').datetime.now(__import__('datetime').timezone.utc).isoformat(timespec='seconds'), 'torch',
torch.__version__, 'cuda', torch.version.cuda, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())), 'gpus',
torch.cuda.device_count(), torch.cuda.get_device_name(0))" 2>&1 | tee "$OUT/env.txt"
t0=$SECONDS
timeout -k 10 "${BENCH13_S:-200}" "${R2[@]}" benchmarks/smp_throughput.py --out "$OUT/bench" --profile \
  --only '1.3b:fsdp2$,1.3b:smp tp2 base,1.3b:smp tp2 +,1.3b:smp tp2$' > "$OUT/bench13.log" 2>&1
echo "1.3b part: exit $? after $((SECONDS - t0))s" | tee -a "$OUT/env.txt"
t0=$SECONDS
timeout -k 10 "${BENCH67_S:-150}" "${R2[@]}" benchmarks/smp_throughput.py --out "$OUT/bench" --warmup 1 --steps 3 \
  --only '6.7b:fsdp2+ac s8k,6.7b:smp tp2+ac s8k,6.7b:smp tp2 s8k' > "$OUT/bench67.log" 2>&1
echo "6.7b part: exit $? after $((SECONDS - t0))s" | tee -a "$OUT/env.txt"
t0=$SECONDS
for model in neox llama-flash; do
  args=(--model "${model%-flash}")
  [ "$model" = llama-flash ] && args+=(--flash)
  timeout -k 5 "${HF_S:-40}" "${R2[@]}" tests/smp/hf_aws_worker.py "${args[@]}" --matrix all > "$OUT/hf_$model.log" 2>&1
  echo "hf $model: exit $? $(grep -c '"ok": true' "$OUT/hf_$model.log") ok $(grep -c '"ok": false' "$OUT/hf_$model.log") failed" \
    | tee -a "$OUT/env.txt"
done
echo "hf part: $((SECONDS - t0))s" | tee -a "$OUT/env.txt"
grep -h "tok/s/GPU\|OOM\|Error" "$OUT/bench13.log" "$OUT/bench67.log" | sort -u | tee "$OUT/summary.txt"
