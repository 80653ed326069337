"""The manifests for a submission: pure and deterministic (same submission + options → same objects, same order).

Every host of the plan becomes one pod (a node / replica) of the chosen flavour, all from one template: the pod
runs `python -m smdist_launcher.backends.kubernetes.pod`, which picks its host from its index (the flavour's
index variable, `SMDIST_INDEX_ENV`), maps the plan's host names to the pods' DNS names (`SMDIST_HOST_DNS`), lays out
the SageMaker `/opt/ml` tree, fetches the channels from S3 and runs `smdist-train` (which fetches the code)
for that host. The plan travels in the pod's environment (`SMDIST_PLAN_JSON`, secrets redacted), so the torchrun
topology is the plan's, never re-derived here.

Objects, one per kind, in a stable order:
- trainjob: TrainJob (runtimeRef torch-distributed; the torch plugin's PET_* are left to the plugin)
- jobset:   JobSet (network.enableDNSHostnames: the JobSet controller makes the headless Service itself)
- hyperpod: HyperPodPyTorchJob
- job:      Service (headless) + Indexed batch/v1 Job
"""
from __future__ import annotations

import json
from typing import Any

from ...errors import ErrorItem, ValidationError
from ...plan.model import LaunchPlan
from ..api import Submission
from .options import KubernetesOptions

POD_MODULE = "smdist_launcher.backends.kubernetes.pod"
CONTAINER = "node"              # the Trainer's torch runtime names its trainer container "node"
REPLICATED_JOB = "node"         # the runtime's replicated job; our JobSet uses the same name
PLAN_ENV = "SMDIST_PLAN_JSON"
INDEX_ENV = "SMDIST_INDEX_ENV"  # which variable holds the pod's host index (0-based)
DNS_ENV = "SMDIST_HOST_DNS"     # the pods' DNS names, `{index}` for the host index
JOB_LABEL = "smdist.io/job"
SECRET_SUFFIX = "-secrets"
MANAGER = "smdist.io/launcher"
MPI_LAUNCHERS = frozenset({"mpirun"})
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_API = f"{TRAINER_GROUP}/v1alpha1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
HYPERPOD_API = "sagemaker.amazonaws.com/v1"
# The variable each flavour's pods find their index in (0-based): JobSet and Indexed Jobs set JOB_COMPLETION_INDEX
# (a TrainJob runs as a JobSet); the HyperPod operator gives each pod its node rank as PET_NODE_RANK (hyperpodrun).
_INDEX = {"trainjob": "JOB_COMPLETION_INDEX", "jobset": "JOB_COMPLETION_INDEX", "hyperpod": "PET_NODE_RANK",
          "job": "JOB_COMPLETION_INDEX"}


def object_name(plan: LaunchPlan) -> str:
    """The objects' name: the job name in lower case (Kubernetes names are lower case; validate.py checks the rest)."""
    return plan.job_name.lower()


def host_dns(flavour: str, name: str, namespace: str) -> str:
    """Each pod's stable DNS name, `{index}` for its host index (what SMDIST_HOST_MAP maps algo-N to)."""
    if flavour in ("trainjob", "jobset"):   # JobSet: <jobset>-<replicated job>-<job index>-<pod index>.<subdomain>
        return f"{name}-{REPLICATED_JOB}-0-{{index}}.{name}.{namespace}.svc"
    if flavour == "job":                    # Indexed Job with subdomain = the headless Service
        return f"{name}-{{index}}.{name}.{namespace}.svc"
    return ""                               # hyperpod: the operator's MASTER_ADDR (pod.py)


def gpus_per_node(plan: LaunchPlan, options: KubernetesOptions) -> int:
    """nvidia.com/gpu per pod: the option, else the instance type's GPUs from the catalog (local_gpu: a process
    per GPU), else none."""
    if options.gpus_per_node is not None:
        return options.gpus_per_node
    if plan.instance_type == "local_gpu":
        return plan.processes_per_host
    from ...jobspec.catalog import is_known, lookup

    if plan.instance_type.startswith("ml.") and is_known(plan.instance_type):
        return lookup(plan.instance_type).gpus
    return 0


def neuron_cores_per_node(plan: LaunchPlan) -> int:
    """aws.amazon.com/neuroncore per pod (the Neuron device plugin's resource): the instance type's Neuron cores."""
    from ...jobspec.catalog import is_known, lookup

    return lookup(plan.instance_type).neuron_cores if is_known(plan.instance_type) else 0


def resources(plan: LaunchPlan, options: KubernetesOptions) -> dict[str, Any]:
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    gpus = gpus_per_node(plan, options)
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    cores = neuron_cores_per_node(plan)
    if cores:
        limits["aws.amazon.com/neuroncore"] = str(cores)
    if options.efa_per_node:
        limits["vpc.amazonaws.com/efa"] = str(options.efa_per_node)
    if options.cpu:
        requests["cpu"] = options.cpu
    if options.memory:
        requests["memory"] = options.memory
    out: dict[str, Any] = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def _base(plan: LaunchPlan) -> str:
    """Where submit puts what the pods fetch: under the output path (`s3://<bucket>` when none is set: the
    submitter fills in the bucket, as SageMaker's default bucket)."""
    return (plan.output_path or "s3://<bucket>").rstrip("/") + f"/{plan.job_name}"


def code_uri(plan: LaunchPlan) -> str:
    """Where the pods fetch the code: an s3:// source_dir as it is, else where submit uploads sourcedir.tar.gz."""
    if plan.source_dir and plan.source_dir.startswith("s3://"):
        return plan.source_dir
    return f"{_base(plan)}/source/sourcedir.tar.gz"


def uploads(plan: LaunchPlan) -> dict[str, str]:
    """Channel name → the s3:// prefix submit uploads a local (file:// or path) channel to before creating the
    objects; s3:// channels are fetched as they are."""
    return {name: f"{_base(plan)}/input/{name}" for name, ch in sorted(plan.channels.items())
            if not ch.uri.startswith("s3://")}


def pod_plan(plan: LaunchPlan) -> LaunchPlan:
    """The plan as the pods get it: every channel on S3 (local ones where submit uploads them) and the code from S3
    (`sagemaker_submit_directory`: the runtime downloads and unpacks it itself). Hosts, argv and env unchanged."""
    moved = uploads(plan)
    channels = {name: (ch.model_copy(update={"uri": moved[name]}) if name in moved else ch)
                for name, ch in plan.channels.items()}
    hps = {**plan.sagemaker_hyperparameters, "sagemaker_submit_directory": json.dumps(code_uri(plan))}
    return plan.model_copy(update={"channels": channels, "sagemaker_hyperparameters": hps})


def container_env(submission: Submission, flavour: str, name: str, namespace: str) -> list[dict[str, Any]]:
    """The pod's environment: what pod.py needs to become its host; the job's own environment is in the plan."""
    from ..toolkit.resilience_plan import resilience_of

    plan = pod_plan(submission.plan)
    # the plan as compact JSON, secrets redacted: their values reach the pods only from the Secret (secret_env)
    env = {PLAN_ENV: json.dumps(plan.to_dict(), sort_keys=True, separators=(",", ":")),
           INDEX_ENV: _INDEX[flavour], DNS_ENV: host_dns(flavour, name, namespace)}
    host = resilience_of(submission.policy).for_hosts(watch_logs=True)
    if host.active:   # process restarts / log monitoring: smdist-train does them itself, as in our image on SageMaker
        from ...container.host_resilience import RESILIENCE_ENV

        env[RESILIENCE_ENV] = host.encode()
    refs = [{"name": key, "valueFrom": {"secretKeyRef": {"name": secret_name(name), "key": key}}}
            for key in sorted(secret_values(submission.plan))]
    return [*({"name": k, "value": v} for k, v in env.items() if v), *refs]


def secret_name(name: str) -> str:
    """The Secret holding the job's secret values (created by submit, referenced by every pod)."""
    return f"{name}{SECRET_SUFFIX}"


def secret_values(plan: LaunchPlan) -> dict[str, str]:
    """The Secret's data: each secret environment variable under its own name, and the secret hyperparameters as
    SMDIST_SECRET_HYPERPARAMETERS (the runtime's local-mode hand-off). Real values: never rendered into a manifest
    (the dry run renders only their keys); submit sends them as the Secret object."""
    from ...contract.config_files import hyperparameters_for
    from ...contract.secrets import SECRET_HPS_ENV, encode_secret_env, is_secret_key, secret_hyperparameters

    out = {key: value for key, value in plan.environment.items() if is_secret_key(key)}
    raw = hyperparameters_for(plan.model_dump(mode="json"))
    if secret_hyperparameters(raw):
        out[SECRET_HPS_ENV] = encode_secret_env(raw)
    return out


def secret_object(submission: Submission, options: KubernetesOptions) -> dict[str, Any] | None:
    """The Secret with the real values (None when the job has none); submit creates it before the workload."""
    values = secret_values(submission.plan)
    if not values:
        return None
    name = object_name(submission.plan)
    meta = _metadata(secret_name(name), options, submission.plan)
    meta["labels"][JOB_LABEL] = name
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque",
            "stringData": dict(sorted(values.items()))}


def container(submission: Submission, options: KubernetesOptions, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": CONTAINER, "image": options.image}
    if options.image_pull_policy:
        out["imagePullPolicy"] = options.image_pull_policy
    out["command"] = ["python3", "-m", POD_MODULE]
    out["env"] = container_env(submission, options.flavour, name, options.namespace)
    res = resources(submission.plan, options)
    if res:
        out["resources"] = res
    return out


def pod_settings(options: KubernetesOptions) -> dict[str, Any]:
    """What every pod spec carries from the options (TrainJob: through a runtime patch)."""
    out: dict[str, Any] = {}
    if options.service_account:
        out["serviceAccountName"] = options.service_account
    if options.node_selector:
        out["nodeSelector"] = dict(sorted(options.node_selector.items()))
    if options.tolerations:
        out["tolerations"] = [t.manifest() for t in options.tolerations]
    if options.image_pull_secrets:
        out["imagePullSecrets"] = [{"name": s} for s in options.image_pull_secrets]
    return out


def _metadata(name: str, options: KubernetesOptions, plan: LaunchPlan) -> dict[str, Any]:
    return {"name": name, "namespace": options.namespace,
            "labels": {JOB_LABEL: name, "app.kubernetes.io/managed-by": "smdist"},
            "annotations": {"smdist.io/job-name": plan.job_name}}


def _pod_template(submission: Submission, options: KubernetesOptions, name: str,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": "Never", **(extra or {}), **pod_settings(options),
                            "containers": [container(submission, options, name)]}
    return {"metadata": {"labels": {JOB_LABEL: name}}, "spec": spec}


def _retries(submission: Submission, flavour: str, concept: str | None) -> int:
    """Restarts of the whole job after the first attempt (max_retry_attempts - 1); refused where the flavour has no
    such concept."""
    attempts = submission.policy.max_retry_attempts
    restarts = max(0, (attempts or 1) - 1)
    if restarts and concept is None:
        why = {"trainjob": "a TrainJob's restarts are its ClusterTrainingRuntime's JobSet failurePolicy, which a "
                           "TrainJob cannot set (use --flavour jobset or hyperpod)",
               "job": "a plain Job restarts single pods, not the whole group a rendezvous needs (use --flavour "
                      "jobset or hyperpod)"}[flavour]
        raise ValidationError([ErrorItem("max_retry_attempts", why, attempts)])
    return restarts


def refusals(plan: LaunchPlan, options: KubernetesOptions) -> list[ErrorItem]:
    """What the Kubernetes flavours cannot run, each with the reason (before anything is rendered)."""
    out: list[ErrorItem] = []
    if plan.launcher in MPI_LAUNCHERS or any(h.role in ("mpi_master", "mpi_worker") for h in plan.hosts):
        out.append(ErrorItem("distribution", f"the {plan.strategy!r} plan runs under mpirun, which the kubernetes "
                             "backend does not render yet (it needs the Trainer's MPI runtime or an sshd launcher "
                             "pod); use torch_distributed, or the slurm / sagemaker backends", plan.strategy))
    if plan.instance_groups and len(plan.instance_groups) > 1:
        out.append(ErrorItem("instance_groups", "the kubernetes backend renders one pod template for every host; "
                             "heterogeneous clusters are not rendered (use one instance group)",
                             [g.name for g in plan.instance_groups]))
    from ...jobspec.inputs import channel_name_ok

    for name, channel in sorted(plan.channels.items()):
        if not channel_name_ok(name):   # a plan made in Python skips the jobspec's check; the name becomes an S3
            # key (input/<name>) and the pods' input/data/<name> folder
            out.append(ErrorItem(f"inputs.{name}", "is not a channel name (letters, digits, '.', '_' and '-', at most "
                                 "64, not '.' or '..')", name))
            continue
        if channel.distribution == "ShardedByS3Key":   # each pod stages its channels alone: no share to compute
            out.append(ErrorItem(f"inputs.{name}.distribution", "ShardedByS3Key is not rendered for kubernetes (each "
                                 "pod would get every object); use FullyReplicated", channel.distribution))
    return out


def render_manifests(submission: Submission, options: KubernetesOptions) -> list[dict[str, Any]]:
    """The objects for the flavour in options, in the order they are created. ValidationError when the plan cannot
    run on that flavour (the reason named)."""
    plan = submission.plan
    problems = refusals(plan, options)
    if problems:
        raise ValidationError(problems)
    name = object_name(plan)
    render = {"trainjob": _trainjob, "jobset": _jobset, "hyperpod": _hyperpod, "job": _job}[options.flavour]
    return render(submission, options, name)


def _trainjob(submission: Submission, options: KubernetesOptions, name: str) -> list[dict[str, Any]]:
    plan = submission.plan
    _retries(submission, "trainjob", None)
    box = container(submission, options, name)
    trainer: dict[str, Any] = {"image": box["image"], "command": box["command"], "env": box["env"],
                               "numNodes": plan.instance_count, "numProcPerNode": plan.processes_per_host}
    if "resources" in box:
        trainer["resourcesPerNode"] = box["resources"]
    spec: dict[str, Any] = {"runtimeRef": {"name": options.runtime, "apiGroup": TRAINER_GROUP,
                                           "kind": "ClusterTrainingRuntime"}}
    if plan.max_run:
        spec["activeDeadlineSeconds"] = plan.max_run
    spec["trainer"] = trainer
    settings = pod_settings(options)
    if settings:   # the runtime's pods, patched: the TrainJob itself has no pod fields
        pod = {"replicatedJobs": [{"name": REPLICATED_JOB, "template": {"spec": {"template": {"spec": settings}}}}]}
        spec["runtimePatches"] = [{"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": pod}}}]
    return [{"apiVersion": TRAINER_API, "kind": "TrainJob", "metadata": _metadata(name, options, plan), "spec": spec}]


def _jobset(submission: Submission, options: KubernetesOptions, name: str) -> list[dict[str, Any]]:
    plan = submission.plan
    n = plan.instance_count
    job_spec: dict[str, Any] = {"parallelism": n, "completions": n, "completionMode": "Indexed", "backoffLimit": 0}
    if plan.max_run:
        job_spec["activeDeadlineSeconds"] = plan.max_run
    job_spec["template"] = _pod_template(submission, options, name)
    spec: dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "replicatedJobs": [{"name": REPLICATED_JOB, "replicas": 1, "template": {"spec": job_spec}}],
        "successPolicy": {"operator": "All"},
    }
    restarts = _retries(submission, "jobset", "failurePolicy.maxRestarts")
    spec["failurePolicy"] = {"maxRestarts": restarts}
    return [{"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": _metadata(name, options, plan), "spec": spec}]


def _hyperpod(submission: Submission, options: KubernetesOptions, name: str) -> list[dict[str, Any]]:
    plan = submission.plan
    run_policy: dict[str, Any] = {"cleanPodPolicy": "None",
                                  "jobMaxRetryCount": _retries(submission, "hyperpod", "runPolicy.jobMaxRetryCount")}
    if plan.max_run:
        run_policy["activeDeadlineSeconds"] = plan.max_run
    spec: dict[str, Any] = {
        "nprocPerNode": str(plan.processes_per_host),
        "replicaSpecs": [{"name": "pods", "replicas": plan.instance_count,
                          "template": _pod_template(submission, options, name)}],
        "runPolicy": run_policy,
    }
    return [{"apiVersion": HYPERPOD_API, "kind": "HyperPodPyTorchJob", "metadata": _metadata(name, options, plan),
             "spec": spec}]


def _job(submission: Submission, options: KubernetesOptions, name: str) -> list[dict[str, Any]]:
    plan = submission.plan
    _retries(submission, "job", None)
    n = plan.instance_count
    meta = _metadata(name, options, plan)
    service = {"apiVersion": "v1", "kind": "Service", "metadata": meta,
               "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {JOB_LABEL: name}}}
    job_spec: dict[str, Any] = {"parallelism": n, "completions": n, "completionMode": "Indexed", "backoffLimit": 0}
    if plan.max_run:
        job_spec["activeDeadlineSeconds"] = plan.max_run
    job_spec["template"] = _pod_template(submission, options, name, {"subdomain": name})
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec}
    return [service, job]
