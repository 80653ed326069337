"""What each pod runs (`python -m smdist_launcher.backends.kubernetes.pod`, the command of every rendered flavour).

The pod becomes one host of the plan, as a SageMaker container would: its index (the variable `$SMDIST_INDEX_ENV`
names: JOB_COMPLETION_INDEX for JobSet / TrainJob / Indexed Job pods, PET_NODE_RANK for HyperPod's) picks
algo-<index + 1>; the plan's host names map to the pods' DNS names (`$SMDIST_HOST_DNS`, `{index}` filled in; HyperPod:
the first host is the operator's MASTER_ADDR); the `/opt/ml` tree is written as SageMaker shapes it, the S3 channels
and checkpoint_s3_uri are downloaded into input/data/<channel> and the checkpoint folder, and `smdist-train` runs
the host (it fetches the code from `sagemaker_submit_directory` itself). Afterwards (also after a failure) the
checkpoints go back to S3, and the first host delivers model.tar.gz / output.tar.gz under <output_path>/<job>/output/.
The exit code is the host's (1 when it succeeded but its delivery failed)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...contract import MLPaths
from ...contract.secrets import REDACTED, SECRET_HPS_ENV
from ...plan.model import LaunchPlan
from .render import DNS_ENV, INDEX_ENV, PLAN_ENV

ML_ROOT_ENV = "SMDIST_ML_ROOT"


def host_index(plan: LaunchPlan, environ: dict[str, str]) -> int:
    variable = environ.get(INDEX_ENV) or "JOB_COMPLETION_INDEX"
    raw = environ.get(variable)
    # ASCII digits only: str.isdigit() takes '²' (int() then raises) and other scripts' digits
    if raw is None or not re.fullmatch(r"[0-9]{1,9}", raw) or int(raw) >= len(plan.hosts):
        raise SystemExit(f"smdist pod: ${variable} must be a host index 0..{len(plan.hosts) - 1} (got {raw!r})")
    return int(raw)


def host_addresses(plan: LaunchPlan, environ: dict[str, str]) -> dict[str, str] | None:
    """algo-N → the pod's DNS name; None when the flavour gives no pattern and no MASTER_ADDR (names left as they
    are)."""
    pattern = environ.get(DNS_ENV)
    if pattern:
        return {h: pattern.format(index=i) for i, h in enumerate(plan.host_names)}
    master = environ.get("MASTER_ADDR")
    return {plan.master.host: master} if master else None


@dataclass(frozen=True)
class PodHost:
    plan: LaunchPlan
    host: str
    paths: MLPaths
    argv: list[str]
    env: dict[str, str]


def prepare(environ: dict[str, str], root: Path, staging: Path) -> PodHost:
    """This pod's host: /opt/ml laid out, the channels and checkpoints fetched, smdist-train's argv and env."""
    from ...contract import write_host_config
    from ..local.host_environment import host_environment
    from ..toolkit.outputs import checkpoint_dir, restore_checkpoints
    from ..toolkit.staging import stage_channels

    plan = LaunchPlan.model_validate_json(environ[PLAN_ENV])
    host = plan.host_names[host_index(plan, environ)]
    paths = write_host_config(root, plan.to_dict(), host, channels={name: "File" for name in plan.channels})
    stage_channels(plan, {host: paths}, staging)
    restore_checkpoints(plan, {host: paths})   # checkpoint_s3_uri → the host's checkpoint folder, as SageMaker does
    env = host_environment(plan, host, {k: v for k, v in environ.items() if k != PLAN_ENV},
                           job_id=environ.get("SMDIST_JOB_ID") or plan.job_name,
                           addresses=host_addresses(plan, environ), host_roots=None, gpus=None,
                           checkpoint_dir=str(checkpoint_dir(plan, paths)))
    # the plan holds secrets redacted; their values came from the job's Secret (render.secret_values), as env
    for key, value in list(env.items()):
        if value == REDACTED and key in environ:
            env[key] = environ[key]
    if SECRET_HPS_ENV in environ:
        env[SECRET_HPS_ENV] = environ[SECRET_HPS_ENV]
    argv = [sys.executable, "-m", "smdist_launcher.container", "--root", str(paths.root), "--host", host,
            "--plan", str(paths.plan_file)]
    return PodHost(plan, host, paths, argv, env)


def host_launch(environ: dict[str, str], root: Path, staging: Path) -> tuple[list[str], dict[str, str], str]:
    """(argv, env, host) of this pod's smdist-train, with /opt/ml laid out and the channels fetched."""
    pod = prepare(environ, root, staging)
    return pod.argv, pod.env, pod.host


def deliver(pod: PodHost, scratch: Path) -> str | None:
    """After the host ran (also when it failed): its checkpoints to checkpoint_s3_uri; on the first host, the model
    and output/data as model.tar.gz / output.tar.gz under <output_path>/<job>/output/ (pods share no file system:
    the first host's model is the job's, as ranks save it on rank 0). Why it failed, None when it did not."""
    from ..toolkit.outputs import collect_outputs, save_checkpoints

    problems = []
    try:
        save_checkpoints(pod.plan, {pod.host: pod.paths})
    except Exception as exc:  # noqa: BLE001 - reported as the host's failure, the outputs still go
        problems.append(f"checkpoints not saved: {exc}")
    if pod.host == pod.plan.hosts[0].name and (pod.plan.output_path or "").startswith("s3://"):
        try:
            collect_outputs(pod.plan, {pod.host: pod.paths}, scratch / "output")
        except Exception as exc:  # noqa: BLE001 - as above
            problems.append(f"outputs not delivered: {exc}")
    return "; ".join(problems) or None


def main() -> int:
    environ = dict(os.environ)
    root = Path(environ.get(ML_ROOT_ENV) or "/opt/ml")
    root.parent.mkdir(parents=True, exist_ok=True)
    # beside /opt/ml (the same file system): staged folders are renamed into their place
    with tempfile.TemporaryDirectory(prefix="smdist-staging-", dir=root.parent) as staging:
        pod = prepare(environ, root, Path(staging))
        code = subprocess.call(pod.argv, env=pod.env)
        why = deliver(pod, Path(staging))
    if why is not None:
        print(f"[{pod.host}] smdist pod: {why}", flush=True)
        code = code or 1
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
