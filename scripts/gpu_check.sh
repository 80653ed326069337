#!/usr/bin/env bash
# The GPU check of the runtime, in one device call (2+ GPUs, well under 10 minutes). Run from the repo root:
#   bash scripts/gpu_check.sh            # results under $OUT (the device tool's folder) or ./gpu-check
# Checks, each under `timeout`, each one summary line "PASS|FAIL|SKIP <name> <seconds>s"; a failure does not
# stop the rest; the exit status is non-zero if any check failed:
#   - every `-m gpu` test file under tests/ (pytest);
#   - SMP v2 through AWS's script flow (tests/smp/hf_aws_worker.py) on 2 GPUs for the reference GPT, Hugging Face
#     GPT-NeoX, Llama and Llama with SMP's LlamaFlashAttention: TP 2 with FSDP1 (delayed parameters on/off,
#     use_orig_params on/off, no sequence parallelism), TP 2 with FSDP2 (delayed on/off), TP 1 x HSDP 2 -- one
#     line per model and mode; with 4+ GPUs, last, also TP 4 (FSDP1, FSDP2) and TP 2 x hybrid shard 2 (FSDP1 with
#     use_orig_params off/on, FSDP2) on 4 ranks;
#   - the SMDDP data-parallel path: its DDP step benchmark on 2 GPUs (smddp backend against NCCL), for a 0.5M- and
#     a 21M-parameter MLP;
#   - the launcher itself: an SMP v2 TP 2 job through `smdist run` on local_gpu (2 simulated hosts x 1 GPU, then one
#     host x 2 GPUs), and the e2e `-m gpu` files, with the launcher's wheels carried in .whl (the GPU image has no pydantic).
# Sections 1-3 start their ranks under torchrun (one process per GPU): the runtime under test (smp/, smddp/)
# imports without the launcher's dependencies.
set -u -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD/src:$PWD/src/smdist_launcher/compat/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT=${OUT:-./gpu-check}
mkdir -p "$OUT"
SCRATCH=$(mktemp -d /tmp/smdist-gpu-check-XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
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

# 2. SMP v2, AWS's script flow, every mode: one torchrun per model (and GPU count), one RESULT line per mode.
#    2 GPUs: the worker's MATRIX ("all"); with 4 or more GPUs TP 4 and TP 2 x hybrid shard 2 ("all4", 4 ranks) in
#    section 5.
smp_modes() {  # model nproc selection tag: run the worker, one summary line per mode
  local model=$1 nproc=$2 selection=$3 tag=$4
  # the mode's own log in a scratch folder (it is appended to $LOG): $OUT keeps the few files a device call returns
  local args=(--model "${model%-flash}") t0=$SECONDS rc=0 log="$SCRATCH/smp_$model$tag.log" n
  [ "$model" = llama-flash ] && args+=(--flash)
  timeout --kill-after=10 240 $PY -m torch.distributed.run --standalone --nproc-per-node "$nproc" \
    tests/smp/hf_aws_worker.py "${args[@]}" --matrix "$selection" > "$log" 2>&1 || rc=$?
  cat "$log" >> "$LOG"
  n=$(grep -c '^RESULT ' "$log" || true)
  if [ "$n" -eq 0 ]; then
    line FAIL "smp:$model$tag(exit $rc, no result)" $((SECONDS - t0))
    failed=1
    return
  fi
  while read -r status name secs; do
    line "$status" "smp:$model:$name" "$secs"
    [ "$status" = FAIL ] && failed=1
  done < <($PY - "$log" <<'EOF'
import json, sys
for raw in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if raw.startswith("RESULT "):
        row = json.loads(raw[7:])
        print("PASS" if row.get("ok") else "FAIL", row["check"], round(row.get("s", 0)))
EOF
)
  [ "$rc" -ne 0 ] && { line FAIL "smp:$model$tag(exit $rc)" $((SECONDS - t0)); failed=1; }
}
ngpu=$($PY -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
for model in gpt neox llama llama-flash; do
  smp_modes "$model" 2 all ""
done

# 3. SMDDP data parallelism: the DDP step on 2 GPUs through the smddp backend (and NCCL for reference)
check "smddp:ddp-step-2gpu" 180 $PY -m torch.distributed.run --standalone --nproc-per-node 2 \
  benchmarks/smddp_ddp_step.py --hidden 256 --layers 8 --out "$OUT/smddp_ddp_step.json"
check "smddp:ddp-step-2gpu-21m" 180 $PY -m torch.distributed.run --standalone --nproc-per-node 2 \
  benchmarks/smddp_ddp_step.py --hidden 1024 --layers 20 --out "$OUT/smddp_ddp_step_21m.json"

# 4. The launcher itself: SMP v2 TP 2 through `smdist run` on local_gpu (2 simulated hosts x 1 GPU). The GPU image
#    has no pydantic: the wheels of what `smdist run` imports there (pydantic, pydantic-core, typing-extensions,
#    annotated-types, typing-inspection, PyYAML, psutil; cp312 x86-64) travel in the git-ignored folder .whl (the
#    device call carries it) and go into a temp folder on PYTHONPATH; the e2e `-m gpu` files that section 1 skipped
#    for want of pydantic run then too. SKIP without .whl (unless pydantic is there already).
launcher=no-.whl-and-no-pydantic  # or: ready, wheels-failed
if $PY -c "import pydantic" 2>/dev/null; then
  launcher=ready  # the image has it: section 1 ran the e2e files
elif compgen -G ".whl/*.whl" > /dev/null; then
  wheels=$(mktemp -d /tmp/smdist-wheels-XXXXXX)
  t0=$SECONDS
  echo "=== launcher wheels: $(cd .whl && echo *.whl) -> $wheels" >> "$LOG"
  if $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$wheels" .whl/*.whl \
       >> "$LOG" 2>&1 && PYTHONPATH="$PYTHONPATH:$wheels" $PY -c "import smdist_launcher.cli.run, pydantic, yaml, psutil" \
       >> "$LOG" 2>&1; then
    export PYTHONPATH="$PYTHONPATH:$wheels"
    launcher=ready
    line PASS "launcher:wheels" $((SECONDS - t0))
    for f in $(grep -rl --include='test_*.py' 'mark.gpu' tests/e2e | sort); do
      check "pytest:${f#tests/}" 240 $PY -m pytest -q -p no:cacheprovider -m gpu "$f"
    done
  else
    line FAIL "launcher:wheels(install-or-import)" $((SECONDS - t0))
    launcher=wheels-failed
    failed=1
  fi
fi
if [ "$launcher" != ready ]; then
  line SKIP "launcher:smp-v2-tp2-local_gpu-2x1($launcher)" 0
elif [ "$ngpu" -lt 2 ]; then
  line SKIP "launcher:smp-v2-tp2-local_gpu-2x1(needs-2-gpus,$ngpu-visible)" 0
else  # the corpus case's script asserts losses, clipped norms and the gathered model.pt against a 1-process model
  CUDA_VISIBLE_DEVICES=0,1 check "launcher:smp-v2-tp2-local_gpu-2x1" 300 $PY -m smdist_launcher.cli.main run \
    tests/e2e/sagemaker_scripts/smp_v2_tp_transform/job.yaml --instance-type local_gpu --instance-count 2 \
    --processes-per-host 1 --jobs-dir "$(mktemp -d /tmp/smdist-gpu-jobs-XXXXXX)"
  # one host with both GPUs: its own private /opt/ml too (host_isolation), torchrun's two ranks on it
  CUDA_VISIBLE_DEVICES=0,1 check "launcher:smp-v2-tp2-local_gpu-1x2" 300 $PY -m smdist_launcher.cli.main run \
    tests/e2e/sagemaker_scripts/smp_v2_tp_transform/job.yaml --instance-type local_gpu --instance-count 1 \
    --processes-per-host 2 --jobs-dir "$(mktemp -d /tmp/smdist-gpu-jobs-XXXXXX)"
fi

# 5. With 4 or more GPUs: TP 4 and TP 2 x hybrid shard 2 through AWS's script flow, last: on 4 GPUs the whole check
#    runs near a device call's 10 minutes, and these are the rows a 2-GPU machine does not have anyway.
if [ "$ngpu" -ge 4 ]; then
  for model in gpt neox llama llama-flash; do
    smp_modes "$model" 4 all4 "-4gpu"
  done
fi

echo "--- $(grep -c ^PASS "$SUMMARY") passed, $(grep -c ^FAIL "$SUMMARY") failed (log: $LOG)" | tee -a "$SUMMARY"
exit $failed
