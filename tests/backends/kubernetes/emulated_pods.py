"""Emulated operators for the API emulator: a small test controller that expands a TrainJob, a JobSet, a
HyperPodPyTorchJob or an Indexed batch/v1 Job into pods the way its operator does, runs each pod's container
command as a local process with the pod's environment, and writes back what a kubelet and the operator would:
pod phases, exit codes, logs, the job's conditions.

What each expansion does (and what a real operator does beyond it, which this does not prove):
- TrainJob (Trainer v2 torch runtime → JobSet → one Indexed Job): pods `<name>-node-0-<i>`, labelled as JobSet's
  (`jobset.sigs.k8s.io/jobset-name`, `batch.kubernetes.io/job-completion-index`), env = `spec.trainer.env` plus the
  torch plugin's PET_NNODES / PET_NPROC_PER_NODE / PET_NODE_RANK / PET_MASTER_ADDR / PET_MASTER_PORT and
  JOB_COMPLETION_INDEX. The intermediate JobSet and Job objects are not created.
- JobSet: each replicated job's Indexed Job template as pods `<name>-<rjob>-0-<i>` (JobSet's labels, the index
  label, JOB_COMPLETION_INDEX); Completed / Failed. The Job objects and the headless Service are not created.
- batch/v1 Job (Indexed): pods `<name>-<i>-<suffix>`, `batch.kubernetes.io/job-name`, the index label,
  JOB_COMPLETION_INDEX; Complete / Failed (BackoffLimitExceeded: backoffLimit 0 here) through the typed API.
- HyperPodPyTorchJob: `replicas` pods `<name>-<spec>-<i>` from the replica spec's template (its labels kept), env plus
  PET_NODE_RANK / PET_NNODES / PET_NPROC_PER_NODE / MASTER_ADDR / MASTER_PORT, as the operator's hyperpodrun sets.
- A failed pod ends the others (SIGTERM, exit 143, reason Terminated), as JobSet's failure policy (no restarts)
  and HyperPod's operator (jobMaxRetryCount 0) do. Conditions when every pod ended: TrainJob Complete or Failed
  (reason JobSetCompleted / JobSetFailed), HyperPodPyTorchJob Completed or Failed; spec.suspend
  (runPolicy.suspend) kills the pods: Suspended.
- A pod is a process here, not a container: the image is not used (the command runs with this interpreter, which
  has the project installed), and the pods' DNS names resolve nowhere, so each pod's name is mapped to its own
  loopback address (SMDIST_HOST_DNS / MASTER_ADDR given as addresses). The cluster's S3 access (IRSA) is the test's
  moto endpoint and keys in the pods' environment."""
from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

NS = "default"
TRAINER = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
HYPERPOD = ("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs")
JOB = ("batch", "v1", "jobs")   # the typed batch API, not a custom resource
WORKLOADS = (("TrainJob", TRAINER), ("JobSet", JOBSET), ("HyperPodPyTorchJob", HYPERPOD), ("Job", JOB))


def _entries(env: list[dict[str, Any]] | None) -> dict[str, Any]:
    """name -> value, or the valueFrom entry (resolved when the pod starts, as a kubelet does)."""
    return {e["name"]: (e["value"] if "value" in e else {"valueFrom": e["valueFrom"]}) for e in env or []}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class EmulatedPod:
    name: str
    owner: tuple[str, str]            # (kind, name)
    manifest: dict[str, Any]
    proc: subprocess.Popen | None = None
    exit_code: int | None = None


@dataclass
class Operators:
    cluster: Any                      # backends.kubernetes.cluster.Cluster
    logs_dir: Path                    # what the emulator serves as pod logs
    work: Path                        # each pod's /opt/ml and scratch
    pod_env: dict[str, str]           # what every pod gets from the cluster (S3 endpoint and keys: IRSA's stand-in)
    address_base: str = "127.83.0."   # pod i of a job: <base><10 + i>
    pods: dict[str, EmulatedPod] = field(default_factory=dict)
    done: set[tuple[str, str]] = field(default_factory=set)
    seen: set[tuple[str, str]] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    errors: list[BaseException] = field(default_factory=list)

    # --- the loop ------------------------------------------------------------------------------------------------

    def start(self) -> Operators:
        # objects of earlier tests on the same emulator are another controller's (already expanded)
        self.done |= {(kind, o["metadata"]["name"]) for kind, res in WORKLOADS for o in self._list(res)}
        self._thread = threading.Thread(target=self._run, name="emulated-operators", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        for pod in self.pods.values():
            if pod.proc is not None and pod.proc.poll() is None:
                os.killpg(pod.proc.pid, signal.SIGKILL)
                pod.proc.wait()

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            try:
                self._step()
            except BaseException as exc:  # noqa: BLE001 - kept for the test to show, the loop goes on
                self.errors.append(exc)

    def _list(self, res: tuple[str, str, str]) -> list[dict[str, Any]]:
        if res == JOB:
            import json

            out = self.cluster.batch.list_namespaced_job(NS, _preload_content=False)
            return list(json.loads(out.data).get("items") or [])
        return list(self.cluster.custom.list_namespaced_custom_object(*res[:2], NS, res[2]).get("items") or [])

    def _step(self) -> None:
        expansions = {"TrainJob": self._trainjob, "JobSet": self._jobset, "HyperPodPyTorchJob": self._hyperpod,
                      "Job": self._job}
        for kind, res in WORKLOADS:
            for obj in self._list(res):
                key = (kind, obj["metadata"]["name"])
                if key in self.done:
                    continue
                if key not in self.seen:
                    self.seen.add(key)
                    for pod in expansions[kind](obj):
                        self._start(pod)
                suspended = ((obj["spec"].get("runPolicy") or {}).get("suspend") if kind == "HyperPodPyTorchJob"
                             else obj["spec"].get("suspend"))
                if suspended:
                    self._suspend(key, res)
                else:
                    self._reap(key, res)

    # --- expansions ----------------------------------------------------------------------------------------------

    def _address(self, index: int) -> str:
        return f"{self.address_base}{10 + index}"

    def _trainjob(self, obj: dict[str, Any]) -> list[EmulatedPod]:
        name, trainer = obj["metadata"]["name"], obj["spec"]["trainer"]
        n = int(trainer.get("numNodes", 1))
        out = []
        for i in range(n):
            env = _entries(trainer.get("env"))
            env.update(PET_NNODES=str(n), PET_NPROC_PER_NODE=str(trainer.get("numProcPerNode", 1)),
                       PET_NODE_RANK=str(i), PET_MASTER_ADDR=f"{name}-node-0-0.{name}", PET_MASTER_PORT="29500",
                       JOB_COMPLETION_INDEX=str(i))
            labels = {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "node",
                      "batch.kubernetes.io/job-completion-index": str(i), "trainer.kubeflow.org/trainjob-name": name}
            out.append(self._pod(f"{name}-node-0-{i}", ("TrainJob", name), labels,
                                 {"name": "node", "image": trainer["image"], "command": trainer["command"]}, env))
        return out

    def _indexed(self, owner: tuple[str, str], job_spec: dict[str, Any], name_of: Any,
                 labels_of: Any) -> list[EmulatedPod]:
        """An Indexed Job's pods (what the Job controller makes): `completions` pods, JOB_COMPLETION_INDEX set and
        the index label on each, the template's labels kept."""
        template = job_spec["template"]
        box = template["spec"]["containers"][0]
        out = []
        for i in range(int(job_spec.get("completions", 1))):
            env = _entries(box.get("env"))
            env["JOB_COMPLETION_INDEX"] = str(i)
            labels = {**((template.get("metadata") or {}).get("labels") or {}), **labels_of(i),
                      "batch.kubernetes.io/job-completion-index": str(i)}
            out.append(self._pod(name_of(i), owner, labels, box, env))
        return out

    def _jobset(self, obj: dict[str, Any]) -> list[EmulatedPod]:
        """JobSet: one Indexed Job per replicated job (replicas 1 here), pods `<jobset>-<rjob>-0-<i>`."""
        name = obj["metadata"]["name"]
        out = []
        for rjob in obj["spec"]["replicatedJobs"]:
            out += self._indexed(("JobSet", name), rjob["template"]["spec"],
                                 lambda i, r=rjob: f"{name}-{r['name']}-0-{i}",
                                 lambda i, r=rjob: {"jobset.sigs.k8s.io/jobset-name": name,
                                                    "jobset.sigs.k8s.io/replicatedjob-name": r["name"]})
        return out

    def _job(self, obj: dict[str, Any]) -> list[EmulatedPod]:
        """An Indexed batch/v1 Job: pods `<job>-<index>-<suffix>`, labelled with the job's name."""
        name = obj["metadata"]["name"]
        return self._indexed(("Job", name), obj["spec"], lambda i: f"{name}-{i}-emu{i}",
                             lambda i: {"batch.kubernetes.io/job-name": name, "job-name": name})

    def _hyperpod(self, obj: dict[str, Any]) -> list[EmulatedPod]:
        name = obj["metadata"]["name"]
        spec = obj["spec"]
        total = sum(int(r.get("replicas", 1)) for r in spec["replicaSpecs"])
        out, rank = [], 0
        for replica in spec["replicaSpecs"]:
            template = replica["template"]
            for i in range(int(replica.get("replicas", 1))):
                box = template["spec"]["containers"][0]
                env = _entries(box.get("env"))
                env.update(PET_NODE_RANK=str(rank), PET_NNODES=str(total), PET_NPROC_PER_NODE=spec["nprocPerNode"],
                           MASTER_ADDR=self._address(0), MASTER_PORT="29500")
                labels = {**((template.get("metadata") or {}).get("labels") or {}),
                          "sagemaker.amazonaws.com/job-name": name}
                out.append(self._pod(f"{name}-{replica['name']}-{i}", ("HyperPodPyTorchJob", name), labels, box, env))
                rank += 1
        return out

    def _pod(self, name: str, owner: tuple[str, str], labels: dict[str, str], box: dict[str, Any],
             env: dict[str, Any]) -> EmulatedPod:
        manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
                    "spec": {"restartPolicy": "Never", "containers": [
                        {"name": box["name"], "image": box["image"], "command": box["command"],
                         "env": [{"name": k, **(v if isinstance(v, dict) else {"value": v})}
                                 for k, v in env.items()]}]}}
        return EmulatedPod(name, owner, manifest)

    # --- the kubelet's part --------------------------------------------------------------------------------------

    def _start(self, pod: EmulatedPod) -> None:
        self.cluster.create(pod.manifest, NS)
        box = pod.manifest["spec"]["containers"][0]
        env = {e["name"]: self._value(e) for e in box["env"]}
        if env.get("SMDIST_HOST_DNS"):  # the pods' DNS names resolve nowhere here: pod i is <base>1i (< 10 pods)
            env["SMDIST_HOST_DNS"] = self.address_base + "1{index}"
        root = self.work / pod.name
        root.mkdir(parents=True)
        env.update(self.pod_env, HOME=str(root), PATH=os.environ.get("PATH", "/usr/bin:/bin"),
                   SMDIST_ML_ROOT=str(root / "opt" / "ml"), HOSTNAME=pod.name)
        command = list(box["command"])
        if command and command[0] in ("python", "python3"):  # the image's interpreter: this one, with the project
            command[0] = sys.executable
        log_dir = self.logs_dir / NS
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(log_dir / f"{pod.name}.log", "wb") as log:
            pod.proc = subprocess.Popen(command, env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.pods[pod.name] = pod
        self._status(pod, {"phase": "Running", "containerStatuses": [
            {"name": box["name"], "ready": True, "state": {"running": {"startedAt": _now()}}}]})

    def _value(self, entry: dict[str, Any]) -> str:
        """An env entry's value, as the kubelet resolves it: `valueFrom.secretKeyRef` read from the Secret."""
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
        if ref is None:
            return str(entry["value"])
        secret = self.cluster.get("Secret", ref["name"], NS)
        if secret is None or ref["key"] not in (secret.get("data") or {}):
            raise RuntimeError(f"secret {ref['name']!r} has no key {ref['key']!r} (CreateContainerConfigError)")
        return base64.b64decode(secret["data"][ref["key"]]).decode()

    def _status(self, pod: EmulatedPod, status: dict[str, Any]) -> None:
        self.cluster.core.replace_namespaced_pod_status(pod.name, NS, {**pod.manifest, "status": status},
                                                        _preload_content=False)

    def _ended(self, pod: EmulatedPod, code: int, reason: str | None = None) -> None:
        pod.exit_code = code
        status: dict[str, Any] = {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [
            {"name": "node", "state": {"terminated": {"exitCode": code, "finishedAt": _now()}}}]}
        if reason:
            status["reason"] = reason
        self._status(pod, status)

    def _owned(self, key: tuple[str, str]) -> list[EmulatedPod]:
        return [p for p in self.pods.values() if p.owner == key]

    def _reap(self, key: tuple[str, str], res: tuple[str, str, str]) -> None:
        pods = self._owned(key)
        for pod in pods:
            if pod.exit_code is None and pod.proc is not None and pod.proc.poll() is not None:
                code = pod.proc.returncode
                self._ended(pod, code if code >= 0 else 128 - code)
        if any(p.exit_code not in (None, 0) for p in pods):  # JobSet's / HyperPod's failure policy: the rest go
            for pod in pods:
                if pod.exit_code is None and pod.proc is not None:
                    os.killpg(pod.proc.pid, signal.SIGTERM)
                    pod.proc.wait()
                    self._ended(pod, 143, "Terminated")
        if pods and all(p.exit_code is not None for p in pods):
            failed = [p for p in pods if p.exit_code != 0]
            done = "Complete" if key[0] in ("TrainJob", "Job") else "Completed"
            kind, reason = ("Failed", "JobSetFailed") if failed else (done, "JobSetCompleted")
            if key[0] == "Job":
                kind, reason = ("Failed", "BackoffLimitExceeded") if failed else (done, "CompletionsReached")
            self._condition(key, res, kind, reason, f"{len(failed)} of {len(pods)} pods failed" if failed else "")

    def _suspend(self, key: tuple[str, str], res: tuple[str, str, str]) -> None:
        for pod in self._owned(key):
            if pod.exit_code is None and pod.proc is not None:
                os.killpg(pod.proc.pid, signal.SIGTERM)
                pod.proc.wait()
                self._ended(pod, 143, "Suspended")
        self._condition(key, res, "Suspended", "Suspended", "the job was suspended")

    def _condition(self, key: tuple[str, str], res: tuple[str, str, str], kind: str, reason: str,
                   message: str) -> None:
        status = {"conditions": [{"type": kind, "status": "True", "reason": reason, "message": message,
                                  "lastTransitionTime": _now()}]}
        if res == JOB:   # the typed client sends a JSON patch
            self.cluster.batch.patch_namespaced_job_status(key[1], NS, [{"op": "add", "path": "/status",
                                                                        "value": status}], _preload_content=False)
        else:
            self.cluster.custom.patch_namespaced_custom_object_status(*res[:2], NS, res[2], key[1],
                                                                      {"status": status})
        self.done.add(key)
