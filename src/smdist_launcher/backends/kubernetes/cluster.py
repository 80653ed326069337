"""The calls to a cluster, through the official `kubernetes` client (imported only here, and only when a job is
submitted or looked at): create the rendered objects in order, read, suspend, delete, list a job's pods, read pods'
logs. Objects travel as plain dicts (the manifests as rendered); an API refusal becomes our ValidationError."""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...errors import ErrorItem, ValidationError


@dataclass(frozen=True)
class Kind:
    group: str          # "" for the core API
    version: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


KINDS: dict[str, Kind] = {
    "TrainJob": Kind("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
    "JobSet": Kind("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    "HyperPodPyTorchJob": Kind("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs"),
    "Job": Kind("batch", "v1", "jobs"),
    "Service": Kind("", "v1", "services"),
    "Secret": Kind("", "v1", "secrets"),
    "Pod": Kind("", "v1", "pods"),
}


def kind_of(obj: dict[str, Any]) -> Kind:
    kind = obj.get("kind", "")
    if kind not in KINDS or KINDS[kind].api_version != obj.get("apiVersion"):
        raise ValueError(f"kubernetes: {obj.get('apiVersion')}/{kind} is not a kind this backend creates "
                         f"({', '.join(KINDS)})")
    return KINDS[kind]


def _refusal(exc: Any, obj: dict[str, Any]) -> Exception:
    """An ApiException as one of ours: a 422 Invalid is a ValidationError with the API server's field paths."""
    where = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    if exc.status == 422:
        causes = (body.get("details") or {}).get("causes") or [{"field": "", "message": body.get("message", "")}]
        return ValidationError([ErrorItem(f"{where}: {c.get('field', '')}".rstrip(": "), c.get("message", ""))
                                for c in causes], source="the Kubernetes API server")
    return RuntimeError(f"kubernetes: {where}: {exc.status} {exc.reason}: {body.get('message', exc.body)}")


class Cluster:
    """One API server, from a kubeconfig file (the usual places: $KUBECONFIG, ~/.kube/config) or, inside a pod, the
    service account's in-cluster config."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        from kubernetes import client, config

        try:
            self.api = config.new_client_from_config(config_file=kubeconfig, context=context,
                                                     persist_config=False)
        except config.ConfigException:
            if kubeconfig is not None:
                raise
            config.load_incluster_config()  # raises ConfigException naming what is missing
            self.api = client.ApiClient()
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def close(self) -> None:
        self.api.close()

    def _call(self, obj: dict[str, Any], fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            out = fn(*args, **kwargs)
        except ApiException as exc:
            raise _refusal(exc, obj) from None
        if hasattr(out, "data"):  # _preload_content=False: the raw answer, read as the dict it is
            return json.loads(out.data or b"{}")
        return out

    def create(self, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        kind = kind_of(obj)
        raw = {"_preload_content": False}
        match obj["kind"]:
            case "Job":
                return dict(self._call(obj, self.batch.create_namespaced_job, namespace, obj, **raw))
            case "Service":
                return dict(self._call(obj, self.core.create_namespaced_service, namespace, obj, **raw))
            case "Secret":
                return dict(self._call(obj, self.core.create_namespaced_secret, namespace, obj, **raw))
            case "Pod":
                return dict(self._call(obj, self.core.create_namespaced_pod, namespace, obj, **raw))
        return dict(self._call(obj, self.custom.create_namespaced_custom_object, kind.group, kind.version,
                               namespace, kind.plural, obj))

    def get(self, kind_name: str, name: str, namespace: str) -> dict[str, Any] | None:
        """The object, or None when the cluster does not have it (deleted, or never created)."""
        from kubernetes.client.exceptions import ApiException

        kind, raw = KINDS[kind_name], {"_preload_content": False}
        try:
            match kind_name:
                case "Job":
                    out = self.batch.read_namespaced_job(name, namespace, **raw)
                case "Service":
                    out = self.core.read_namespaced_service(name, namespace, **raw)
                case "Secret":
                    out = self.core.read_namespaced_secret(name, namespace, **raw)
                case "Pod":
                    out = self.core.read_namespaced_pod(name, namespace, **raw)
                case _:
                    return dict(self.custom.get_namespaced_custom_object(kind.group, kind.version, namespace,
                                                                         kind.plural, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _refusal(exc, {"kind": kind_name, "metadata": {"name": name}}) from None
        return dict(json.loads(out.data))

    def set_owner(self, kind_name: str, name: str, namespace: str, owner: dict[str, Any]) -> None:
        """Make ``owner`` (a created object, with its uid) the owner of a core object: the cluster's garbage
        collector deletes it with its owner (an owner reference needs the uid, which exists only once created)."""
        ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
               "uid": owner["metadata"]["uid"]}
        patch = [{"op": "add", "path": "/metadata/ownerReferences", "value": [ref]}]
        obj = {"kind": kind_name, "metadata": {"name": name}}
        match kind_name:  # typed patches go as JSON patches (the client's first content type)
            case "Secret":
                self._call(obj, self.core.patch_namespaced_secret, name, namespace, patch, _preload_content=False)
            case "Service":
                self._call(obj, self.core.patch_namespaced_service, name, namespace, patch, _preload_content=False)
            case _:
                raise ValueError(f"kubernetes: set_owner handles Secret and Service, not {kind_name}")

    def suspend(self, kind_name: str, name: str, namespace: str) -> None:
        """spec.suspend = true (HyperPod: spec.runPolicy.suspend): the operator deletes the pods, the object and its
        conditions stay (what `smdist stop` does: nothing of the job's record is lost)."""
        kind, obj = KINDS[kind_name], {"kind": kind_name, "metadata": {"name": name}}
        if kind_name == "Job":  # the typed Job patch is sent as a JSON patch (the client's first content type)
            self._call(obj, self.batch.patch_namespaced_job, name, namespace,
                       [{"op": "replace", "path": "/spec/suspend", "value": True}], _preload_content=False)
            return
        patch = ({"spec": {"runPolicy": {"suspend": True}}} if kind_name == "HyperPodPyTorchJob"
                 else {"spec": {"suspend": True}})
        self._call(obj, self.custom.patch_namespaced_custom_object, kind.group, kind.version, namespace,
                   kind.plural, name, patch)

    def delete(self, kind_name: str, name: str, namespace: str) -> bool:
        """Delete (foreground: its pods go too); False when it was not there."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        kind = KINDS[kind_name]
        options = client.V1DeleteOptions(propagation_policy="Foreground")
        try:
            match kind_name:
                case "Job":
                    self.batch.delete_namespaced_job(name, namespace, body=options, _preload_content=False)
                case "Service":
                    self.core.delete_namespaced_service(name, namespace, body=options, _preload_content=False)
                case "Secret":
                    self.core.delete_namespaced_secret(name, namespace, body=options, _preload_content=False)
                case "Pod":
                    self.core.delete_namespaced_pod(name, namespace, body=options, _preload_content=False)
                case _:
                    self.custom.delete_namespaced_custom_object(kind.group, kind.version, namespace, kind.plural,
                                                                name, body=options)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise _refusal(exc, {"kind": kind_name, "metadata": {"name": name}}) from None
        return True

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        out = self.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
        return list(json.loads(out.data).get("items") or [])

    def pod_log(self, name: str, namespace: str) -> str:
        """The pod's log so far ("" when the pod or its log is gone)."""
        from kubernetes.client.exceptions import ApiException

        try:
            out = self.core.read_namespaced_pod_log(name, namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status in (400, 404):  # gone, or its container not started yet
                return ""
            raise
        return bytes(out.data).decode("utf-8", "replace")

    def follow_pod_log(self, name: str, namespace: str) -> Iterator[bytes]:
        """The pod's log as it is written, until the pod ends (the API server closes the stream)."""
        out = self.core.read_namespaced_pod_log(name, namespace, follow=True, _preload_content=False)
        try:
            yield from out.stream(4096, decode_content=False)
        finally:
            out.release_conn()

    def watch(self, kind_name: str, namespace: str, *, selector: str | None = None,
              timeout_s: int = 30) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event type, object) for a kind in a namespace, from the client's Watch, until timeout_s passes."""
        from kubernetes import watch

        kind = KINDS[kind_name]
        w = watch.Watch()
        kwargs: dict[str, Any] = {"timeout_seconds": timeout_s}
        if selector:
            kwargs["label_selector"] = selector
        if kind_name == "Pod":
            stream = w.stream(self.core.list_namespaced_pod, namespace, **kwargs)
        elif kind_name == "Job":
            stream = w.stream(self.batch.list_namespaced_job, namespace, **kwargs)
        elif kind_name == "Service":
            stream = w.stream(self.core.list_namespaced_service, namespace, **kwargs)
        else:
            stream = w.stream(self.custom.list_namespaced_custom_object, kind.group, kind.version, namespace,
                              kind.plural, **kwargs)
        for event in stream:
            obj = event["object"]
            yield event["type"], (obj if isinstance(obj, dict) else self.api.sanitize_for_serialization(obj))
