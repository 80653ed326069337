"""A submitted Kubernetes job: staging (code and local channels to S3, where the rendered pods fetch them), the
objects created in order, a record in the jobs folder (job.json, backend "kubernetes": namespace, kind, name,
kubeconfig), and what `describe`, `stop` and `logs` read back through cluster.py.

The cluster is the truth; the record keeps what the cluster may lose: the last state seen, the first failing pod,
and whether we stopped it (a suspended or deleted job is Stopped, not Failed)."""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ...errors import ErrorItem, JobFailedError, ValidationError
from ..api import Emit, JobHandle, JobState, JobStatus, Submission
from ..phases import Phase
from ..toolkit.jobdir import JobDir, jobs_root as resolve_jobs_root
from ..toolkit.records import JobRecord
from . import status as st
from .cluster import Cluster
from .options import KubernetesOptions

BACKEND = "kubernetes"
POLL_S = 2.0


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _top(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The object whose conditions are the job's (the last one created: a Service comes before its Job)."""
    return objects[-1]


def selector_of(kind: str, name: str) -> str:
    return st.POD_SELECTORS[kind].format(name=name)


def stage(submission: Submission, objects_yaml: str) -> None:
    """Upload what the pods fetch: the code archive (unless source_dir is already on S3) and every local channel,
    to the places render.py wrote into the pods' plan. Needs an s3:// output_path (the cluster reads S3)."""
    from ..sagemaker.upload import archive_members, upload_archive, write_archive
    from ..storage.locations import parse_location
    from ..storage.s3 import client, upload_file, upload_tree
    from .render import code_uri, uploads

    plan, code = submission.plan, submission.code
    if not (plan.output_path or "").startswith("s3://") or "<bucket>" in objects_yaml:
        raise ValidationError([ErrorItem("output_path", "the kubernetes backend needs an s3:// output_path: the "
                                         "pods fetch the code and channels from S3 and upload the model there",
                                         plan.output_path)])
    s3 = client()
    if not (plan.source_dir or "").startswith("s3://"):
        if code.entry_point is None:
            raise ValueError(f"job {plan.job_name}: the submission names no entry point to pack")
        source = str(code.source) if plan.source_dir is not None and code.source is not None else None
        members = archive_members(source, str(code.entry_point), [str(d) for d in code.dependencies],
                                  follow_symlinks=code.follow_symlinks)
        with tempfile.TemporaryDirectory(prefix="smdist-k8s-") as tmp:
            archive = write_archive(Path(tmp) / "sourcedir.tar.gz", members, plan.to_json())
            upload_archive(s3, archive, code_uri(plan))
    for name, uri in uploads(plan).items():
        local = Path(plan.channels[name].uri.removeprefix("file://"))
        dest = parse_location(uri, field=f"channels.{name}")
        if local.is_dir():
            upload_tree(s3, local, dest)
        else:
            upload_file(s3, local, dest.child(local.name))


def create_all(cluster: Cluster, objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """Create the objects in order, returning them as the cluster made them (uids filled); when one is refused
    (nothing after it is sent), delete those already created: no job record names them, and the Secret would stay
    on the cluster holding the job's secret values."""
    done: list[dict[str, Any]] = []
    try:
        for obj in objects:
            done.append(cluster.create(obj, namespace))
        return done
    except BaseException:
        for obj in reversed(done):
            try:
                cluster.delete(obj["kind"], obj["metadata"]["name"], namespace)
            except Exception as exc:  # noqa: BLE001 - the refusal is what the caller must see; this is said
                _say(f"kubernetes: {obj['kind']}/{obj['metadata']['name']} not deleted after the refusal: {exc}")
        raise


def submit(submission: Submission, options: KubernetesOptions, objects: list[dict[str, Any]], objects_yaml: str, *,
           jobs_root: str | Path | None) -> KubernetesJob:
    """Stage, create every object in order (stopping at the first refusal: nothing after it is sent), record."""
    from .render import secret_object

    stage(submission, objects_yaml)
    secret = secret_object(submission, options)   # the real values: sent, never rendered, recorded or printed
    cluster = Cluster(options.kubeconfig, options.context)
    try:
        created = create_all(cluster, ([secret] if secret is not None else []) + objects, options.namespace)
        if secret is not None:
            own_secret(cluster, secret["metadata"]["name"], options.namespace, created[-1])
    finally:
        cluster.close()
    top = _top(objects)
    name = top["metadata"]["name"]
    job_dir = JobDir.create(resolve_jobs_root(jobs_root), submission.job_name)
    record = JobRecord(job_name=submission.job_name, job_id=name, job_dir=str(job_dir.root), backend=BACKEND,
                       backend_info={"namespace": options.namespace, "kind": top["kind"], "name": name,
                                     "objects": [[o["kind"], o["metadata"]["name"]]
                                                 for o in ([secret] if secret else []) + objects],
                                     "flavour": options.flavour, "kubeconfig": options.kubeconfig,
                                     "context": options.context, "stopped": False,
                                     "output_path": submission.plan.output_path},
                       plan=submission.plan.to_dict(), launcher_pid=0)  # the cluster runs it, not a launcher here
    record.enter_phase(Phase.STARTING)
    record.save(job_dir.record_file)
    return KubernetesJob(JobHandle(backend=BACKEND, job_name=submission.job_name, job_dir=str(job_dir.root)))


def own_secret(cluster: Cluster, name: str, namespace: str, workload: dict[str, Any]) -> None:
    """The workload owns its Secret, so deleting the workload (by hand, or by a TTL) deletes the secret values
    too. Not fatal: the job runs without it, and the Secret is deleted when smdist sees the job end."""
    try:
        cluster.set_owner("Secret", name, namespace, workload)
    except Exception as exc:  # noqa: BLE001 - said, and covered by the deletion at the end
        _say(f"kubernetes: Secret/{name} not given its owner {workload.get('kind')}: {exc}")


def drop_secrets(cluster: Cluster, info: dict[str, Any]) -> None:
    """Delete the job's Secret once the job has ended: no pod needs the values any more, and they should not
    outlive the job on the cluster (an ended workload object may be kept for days for its conditions)."""
    for kind, name in info.get("objects") or []:
        if kind == "Secret":
            try:
                cluster.delete("Secret", name, info["namespace"])
            except Exception as exc:  # noqa: BLE001 - the job's state is what the caller asked for; this is said
                _say(f"kubernetes: Secret/{name} not deleted after the job ended: {exc}")


def _cluster(info: dict[str, Any]) -> Cluster:
    return Cluster(info.get("kubeconfig"), info.get("context"))


def _record(handle: JobHandle) -> JobRecord:
    if not handle.job_dir:
        raise ValueError(f"job {handle.job_name}: a kubernetes job is found through its record in the jobs folder "
                         "(--jobs-dir); this handle names none")
    return JobRecord.load(JobDir(Path(handle.job_dir)).record_file)


def refresh(handle: JobHandle) -> tuple[JobRecord, list[dict[str, Any]]]:
    """The record brought up to date from the cluster (unchanged once final), and the job's pods."""
    record = _record(handle)
    info = record.backend_info
    if JobState.of(record.status).is_terminal:
        return record, []
    cluster = _cluster(info)
    try:
        obj = cluster.get(info["kind"], info["name"], info["namespace"])
        pods = cluster.pods(info["namespace"], selector_of(info["kind"], info["name"]))
        verdict = st.verdict(obj, stopped_by_us=bool(info.get("stopped")))
        hosts = st.pods_by_host(pods)
        if verdict.state.is_terminal:
            keep_logs(cluster, record, hosts)
            drop_secrets(cluster, info)
    finally:
        cluster.close()
    record.hosts = {h: {"pod": p["metadata"]["name"], "phase": (p.get("status") or {}).get("phase"),
                        "exit_code": st.exit_code(p)} for h, p in hosts.items()}
    if verdict.state is JobState.IN_PROGRESS and any(
            (p.get("status") or {}).get("phase") == st.PodPhase.RUNNING for p in hosts.values()) \
            and record.phase != Phase.RUNNING:
        record.enter_phase(Phase.RUNNING)
    record.status = verdict.state
    if verdict.state.is_terminal:
        failing = st.first_failure(pods)
        reason = verdict.reason
        if verdict.state is not JobState.COMPLETED and failing:
            reason = f"{failing}; {reason}" if reason else failing
        record.failure_reason = reason
        if verdict.state is JobState.COMPLETED and info.get("output_path"):
            record.model_data = f"{str(info['output_path']).rstrip('/')}/{record.job_name}/output/model.tar.gz"
        record.ended = time.time()
        record.enter_phase(Phase.DONE)
    record.save(JobDir(Path(record.job_dir)).record_file)
    return record, pods


def keep_logs(cluster: Cluster, record: JobRecord, hosts: dict[str, dict[str, Any]]) -> None:
    """Each host's pod log into the job folder (logs/<host>.log), before the cluster deletes the pods (a stop, a
    ttlSecondsAfterFinished): what `smdist logs` shows once the job has ended. A pod without a log keeps the file."""
    job_dir = JobDir(Path(record.job_dir))
    job_dir.logs_dir.mkdir(parents=True, exist_ok=True)
    for host, pod in hosts.items():
        text = cluster.pod_log(pod["metadata"]["name"], record.backend_info["namespace"])
        if text:
            job_dir.log_file(host).write_text(text)


def describe(handle: JobHandle) -> JobStatus:
    from ..api import HostStatus

    record, _ = refresh(handle)
    return JobStatus(job_name=record.job_name, backend=BACKEND, state=JobState.of(record.status),
                     phase=str(record.phase), reason=record.failure_reason, model_data=record.model_data,
                     created=record.created, ended=record.ended,
                     hosts=[HostStatus(name=h, exit_code=d.get("exit_code"), detail=d)
                            for h, d in record.hosts.items()])


def stop(handle: JobHandle) -> str:
    """Suspend the job's object (its operator deletes the pods; the object, its conditions and our record stay)."""
    record = _record(handle)
    info = record.backend_info
    cluster = _cluster(info)
    try:
        keep_logs(cluster, record, st.pods_by_host(cluster.pods(info["namespace"],
                                                                selector_of(info["kind"], info["name"]))))
        cluster.suspend(info["kind"], info["name"], info["namespace"])
    finally:
        cluster.close()
    record.backend_info = {**info, "stopped": True}
    record.save(JobDir(Path(record.job_dir)).record_file)
    return f"asked kubernetes to suspend {info['kind']}/{info['name']} in namespace {info['namespace']}"


def _prefixed(host: str, text: str) -> str:
    """Each line with its host, as the other backends show a host's lines; lines the runtime already prefixed with
    `[algo-N ...]` (rank lines) are kept as they are."""
    tag = f"[{host}"
    return "".join(line if line.startswith(tag) else f"[{host}] {line}" for line in text.splitlines(keepends=True))


def logs(handle: JobHandle, *, hosts: list[str] | None = None, follow: bool = False, emit: Emit | None = None) -> None:
    """Every host's pod log (the newest pod of each host), in host order; follow: each host's stream until its pod
    ends, hosts one after another."""
    out = emit or (lambda s: sys.stdout.write(s))
    record = _record(handle)
    info = record.backend_info
    if JobState.of(record.status).is_terminal:  # the pods may be gone: the logs kept when it ended
        job_dir = JobDir(Path(record.job_dir))
        kept = sorted((p.stem for p in job_dir.logs_dir.glob("algo-*.log")), key=lambda h: int(h.split("-")[1]))
        for host in kept:
            if not hosts or host in hosts:
                out(_prefixed(host, job_dir.log_file(host).read_text(errors="replace")))
        return
    cluster = _cluster(info)
    try:
        by_host = st.pods_by_host(cluster.pods(info["namespace"], selector_of(info["kind"], info["name"])))
        unknown = sorted(set(hosts or []) - set(by_host))
        if unknown:
            raise ValueError(f"--host: {', '.join(unknown)} has no pod (pods: {', '.join(by_host) or 'none yet'})")
        for host, pod in by_host.items():
            if hosts and host not in hosts:
                continue
            name = pod["metadata"]["name"]
            if not follow:
                out(_prefixed(host, cluster.pod_log(name, info["namespace"])))
                continue
            partial = b""
            for data in cluster.follow_pod_log(name, info["namespace"]):
                complete, _, partial = (partial + data).rpartition(b"\n")
                if complete:
                    out(_prefixed(host, (complete + b"\n").decode("utf-8", "replace")))
            if partial:
                out(_prefixed(host, partial.decode("utf-8", "replace")))
    finally:
        cluster.close()


class KubernetesJob:
    """What submit returns (backends.api.Job)."""

    def __init__(self, handle: JobHandle) -> None:
        self.handle = handle
        self.job_name = handle.job_name

    def describe(self) -> dict[str, Any]:
        return describe(self.handle).summary()

    @property
    def status(self) -> str:
        return describe(self.handle).state.value

    @property
    def model_data(self) -> str | None:
        return describe(self.handle).model_data

    def stop(self) -> str:
        return stop(self.handle)

    def logs(self, follow: bool = False, emit: Emit | None = None) -> None:
        logs(self.handle, follow=follow, emit=emit)

    def wait(self, logs: Any = True, interval: float = POLL_S, emit: Emit | None = None) -> JobStatus:
        """Poll until the job ends (then show every host's log when logs is on); JobFailedError unless Completed."""
        while True:
            now = describe(self.handle)
            if now.is_terminal:
                break
            time.sleep(interval)
        if logs:
            self.logs(emit=emit)
        if now.state is not JobState.COMPLETED:
            raise JobFailedError(self.job_name, now.state.value, now.reason or "no reason given",
                                 job_dir=self.handle.job_dir)
        return now
