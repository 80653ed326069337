#!/usr/bin/env bash
# The main job (README): set up, generate the synthetic MNIST-shaped data set, and train the seed's CNN
# in local mode on 2 simulated hosts x 2 processes on CPU, with the very plan SageMaker would run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/python examples/mnist/make_data.py data/mnist
# "$@" passes overrides through, e.g. --instance-count 3; other launchers: examples/mnist/job_{pytorchddp,mpi}.yaml
exec .venv/bin/smdist run "${SMDIST_DEMO_JOB:-examples/mnist/job_torch_distributed.yaml}" "$@"
