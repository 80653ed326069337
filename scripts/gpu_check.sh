#!/usr/bin/env bash
# The GPU check of the runtime, in one device call (2+ GPUs, well under 10 minutes). Run from the repo root:
#   bash scripts/gpu_check.sh            # results under $OUT (the device tool's folder) or ./gpu-check
# Checks, each under `timeout`, each one summary line "PASS|FAIL|SKIP <name> <seconds>s"; a failure does not
# stop the rest; the exit status is non-zero if any check failed:
#   - every `-m gpu` test file under tests/ (pytest);
#   - SMP v2 through AWS's script flow (tests/smp/hf_aws_worker.py) on 2 GPUs for the reference GPT, Hugging Face
#     GPT-NeoX, Llama and Llama with SMP's LlamaFlashAttention: TP 2 with FSDP1 (delayed parameters on/off,
#     use_orig_params on/off, no sequence parallelism), TP 2 with FSDP2 (delayed on/off), TP 1 x HSDP 2 -- one
#     line per model and mode;
#   - the SMDDP data-parallel path: its DDP step benchmark on 2 GPUs (smddp backend against NCCL).
# The ranks start under torchrun (2 processes, one GPU each): the GPU image has no pydantic, which the
# launcher's local_gpu backend needs, while the runtime under test (smp/, smddp/) imports without it.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/src:$PWD/src/smdist_launcher/compat/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu-check}
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
SUMMARY="$OUT/summary.txt"
: > "$LOG"
: > "$SUMMARY"
PY=${PYTHON:-python3}
failed=0

line() {  # status name seconds
  printf '%s %s %ss\n' "$1" "$2" "$3" | tee -a "$SUMMARY"
}

check() {  # name timeout_s command...: run, log, one summary line
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS rc=0
  echo "=== $name: $*" >> "$LOG"
  timeout --kill-after=10 "$limit" "$@" >> "$LOG" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    line PASS "$name" $((SECONDS - t0))
  elif [ "$rc" -eq 5 ] && [ "$3" = pytest ]; then  # pytest: no test selected (the file's gpu mark is in a string)
    line SKIP "$name" $((SECONDS - t0))
  else
    [ "$rc" -eq 124 ] && echo "(timed out after ${limit}s)" >> "$LOG"
    line FAIL "$name" $((SECONDS - t0))
    failed=1
  fi
}

$PY -c "import torch; gpu = torch.cuda.is_available(); print('torch', torch.__version__, 'cuda', torch.version.cuda,
'nccl', '.'.join(map(str, torch.cuda.nccl.version())) if gpu else '-', 'gpus', torch.cuda.device_count(),
torch.cuda.get_device_name(0) if gpu else '')" 2>&1 | tee -a "$SUMMARY"

# 1. every -m gpu test file (the SMP TP matrix test is run below, mode by mode, instead)
for f in $(grep -rl --include='test_*.py' 'mark.gpu' tests | sort); do
  [ "$f" = tests/smp/test_tp_fsdp1.py ] && continue  # its GPU test is section 2's runs, one line per mode
  if [ "${f#tests/e2e/}" != "$f" ] && ! $PY -c "import pydantic" 2>/dev/null; then
    line SKIP "pytest:${f#tests/}(no-pydantic-on-this-image)" 0  # the launcher's job API needs it
    continue
  fi
  check "pytest:${f#tests/}" 240 $PY -m pytest -q -p no:cacheprovider -m gpu "$f"
done

# 2. SMP v2, AWS's script flow, every mode: one torchrun per model, one RESULT line per mode
for model in gpt neox llama llama-flash; do
  args=(--model "${model%-flash}")
  [ "$model" = llama-flash ] && args+=(--flash)
  t0=$SECONDS
  rc=0
  timeout --kill-after=10 240 $PY -m torch.distributed.run --standalone --nproc-per-node 2 \
    tests/smp/hf_aws_worker.py "${args[@]}" --matrix all > "$OUT/smp_$model.log" 2>&1 || rc=$?
  cat "$OUT/smp_$model.log" >> "$LOG"
  n=$(grep -c '^RESULT ' "$OUT/smp_$model.log" || true)
  if [ "$n" -eq 0 ]; then
    line FAIL "smp:$model(exit $rc, no result)" $((SECONDS - t0))
    failed=1
    continue
  fi
  while read -r status name secs; do
    line "$status" "smp:$model:$name" "$secs"
    [ "$status" = FAIL ] && failed=1
  done < <($PY - "$OUT/smp_$model.log" <<'EOF'
import json, sys
for raw in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if raw.startswith("RESULT "):
        row = json.loads(raw[7:])
        print("PASS" if row.get("ok") else "FAIL", row["check"], round(row.get("s", 0)))
EOF
)
  [ "$rc" -ne 0 ] && { line FAIL "smp:$model(exit $rc)" $((SECONDS - t0)); failed=1; }
done

# 3. SMDDP data parallelism: the DDP step on 2 GPUs through the smddp backend (and NCCL for reference)
check "smddp:ddp-step-2gpu" 180 $PY -m torch.distributed.run --standalone --nproc-per-node 2 \
  benchmarks/smddp_ddp_step.py --hidden 256 --layers 8 --out "$OUT/smddp_ddp_step.json"

echo "--- $(grep -c ^PASS "$SUMMARY") passed, $(grep -c ^FAIL "$SUMMARY") failed (log: $LOG)" | tee -a "$SUMMARY"
exit $failed
