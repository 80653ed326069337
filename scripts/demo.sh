#!/usr/bin/env bash
# The main job (README): set up, generate the synthetic MNIST-shaped data set, and train the seed's CNN
# in local mode on 2 simulated hosts x 2 processes on CPU, with the very plan SageMaker would run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
echo "[demo] writing the synthetic MNIST-shaped data set to data/mnist"
.venv/bin/python examples/mnist/make_data.py data/mnist
JOB=${SMDIST_DEMO_JOB:-examples/mnist/job_torch_distributed.yaml}
echo "[demo] smdist run $JOB (about a minute on 2 cores; afterwards: .venv/bin/smdist jobs, .venv/bin/smdist logs)"
# "$@" passes overrides through, e.g. --instance-count 3; other launchers: examples/mnist/job_{pytorchddp,mpi}.yaml
status=0
.venv/bin/smdist run "$JOB" "$@" || status=$?
# The job's report: its metric_definitions' loss curve and accuracy, hosts, attempts, failure if any
if REPORT=$(.venv/bin/smdist report); then
    NAME=$(basename "$(dirname "$REPORT")")
    echo "[demo] the report (loss curve, accuracy, hosts, timeline): $REPORT"
    echo "[demo] write it again any time: .venv/bin/smdist report $NAME"
fi
exit "$status"
