"""A small Kubernetes API emulator for the tests: the REST paths the official `kubernetes` client calls for the kinds
the backend creates (TrainJob, JobSet, HyperPodPyTorchJob, batch/v1 Job, Service, Pod), over HTTP on 127.0.0.1.

Run as a subprocess (`python emulator.py --logs-dir DIR`; it prints `listening on PORT`), stopped by PID. What it does:
create (metadata filled: uid, namespace, resourceVersion, creationTimestamp; 409 AlreadyExists), get, list (equality
label selectors), watch (`?watch=true`: the events after a resourceVersion, then new ones until timeoutSeconds),
replace, merge patch, the status subresource (a PUT/PATCH there changes only `status`), delete, and pod logs (the file
`<logs-dir>/<namespace>/<pod>.log`, written by whatever runs the emulated pod; `follow` streams it until the pod's
phase is Succeeded or Failed). Creating a job kind runs the backend's own `validate_manifests`: a refusal is a 422
`Invalid` Status whose `details.causes` carry our key paths. Not emulated: controllers (see emulated_pods.py),
defaulting, admission webhooks beyond that validator, discovery/OpenAPI, authentication, field selectors.

Why ours, not kmock: kmock stores objects as sent (no uid/resourceVersion), and watch, status subresources, the 422
refusal and pod logs would all be hooks of ours anyway; a stdlib server keeps every behaviour visible here."""
from __future__ import annotations

import argparse
import base64
import json
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

# (group, version, plural) -> kind; group "" is the core API (/api/v1)
RESOURCES: dict[tuple[str, str, str], str] = {
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs"): "TrainJob",
    ("jobset.x-k8s.io", "v1alpha2", "jobsets"): "JobSet",
    ("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs"): "HyperPodPyTorchJob",
    ("batch", "v1", "jobs"): "Job",
    ("", "v1", "services"): "Service",
    ("", "v1", "secrets"): "Secret",
    ("", "v1", "pods"): "Pod",
}
VALIDATED = {"TrainJob", "JobSet", "HyperPodPyTorchJob", "Job", "Service"}
TERMINAL_PHASES = {"Succeeded", "Failed"}
MAX_WATCH_S = 60.0


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (also what we apply for a strategic merge patch: enough for the fields we patch)."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 add/replace/remove on object keys (what the typed clients send for a patch): enough for suspend."""
    out = json.loads(json.dumps(target))
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        if op["op"] == "remove":
            node.pop(last, None)
        else:
            node[last] = op["value"]
    return out


def _selected(obj: dict[str, Any], selector: str | None) -> bool:
    if not selector:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in selector.split(","):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif labels.get(term.strip()) is None:
            return False
    return True


def _refusal(kind: str, name: str, exc: Exception) -> dict[str, Any]:
    """The 422 an API server answers for an invalid object, its causes from our ValidationError's items."""
    items = getattr(exc, "errors", None) or []
    causes = [{"reason": "FieldValueInvalid", "field": e.path, "message": e.message} for e in items] or \
        [{"reason": "FieldValueInvalid", "field": "", "message": str(exc)}]
    message = f'{kind}.{"/".join([name])} "{name}" is invalid: ' + "; ".join(
        f"{c['field']}: {c['message']}" for c in causes)
    return _status(422, "Invalid", message, {"name": name, "kind": kind, "causes": causes})


class Store:
    """Objects by (group, version, plural, namespace, name), one resourceVersion counter, the watch events."""

    def __init__(self, logs_dir: Path) -> None:
        self.logs_dir = logs_dir
        self.objects: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
        self.events: list[tuple[int, tuple[str, str, str, str], str, dict[str, Any]]] = []
        self.version = 0
        self.changed = threading.Condition()

    def _record(self, key: tuple[str, str, str, str, str], kind: str, obj: dict[str, Any]) -> None:
        # caller holds self.changed
        self.events.append((self.version, key[:4], kind, json.loads(json.dumps(obj))))
        self.changed.notify_all()

    def bump(self, obj: dict[str, Any]) -> None:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)


class Handler(BaseHTTPRequestHandler):
    server_version = "smdist-k8s-emulator/1"
    protocol_version = "HTTP/1.1"   # keep-alive and chunked streams, as the client expects of an API server
    store: Store

    def log_message(self, *args: Any) -> None:  # quiet: the tests read answers, not access logs
        pass

    # --- parsing -------------------------------------------------------------------------------------------------

    def _route(self) -> tuple[tuple[str, str, str], str, str | None, str | None, dict[str, list[str]]] | None:
        # the body is read first, whatever the answer: a keep-alive connection must not keep an unread body
        self.raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        parts = [p for p in url.path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if len(rest) < 3 or rest[0] != "namespaces":
            return None
        namespace, plural = rest[1], rest[2]
        name = rest[3] if len(rest) > 3 else None
        sub = rest[4] if len(rest) > 4 else None
        if (group, version, plural) not in RESOURCES:
            return None
        return (group, version, plural), namespace, name, sub, query

    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        return json.loads(self.raw or b"{}")

    def _not_found(self, kind: str, name: str) -> None:
        self._send(404, _status(404, "NotFound", f'{kind} "{name}" not found',
                                {"name": name, "kind": kind}))

    # --- verbs ---------------------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        route = self._route()
        if route is None:
            return self._send(404, _status(404, "NotFound", f"no route {self.path}"))
        res, ns, name, sub, query = route
        kind, store = RESOURCES[res], self.store
        if name is None:
            if query.get("watch", ["false"])[0].lower() in ("true", "1"):
                return self._watch(res, ns, query)
            selector = query.get("labelSelector", [None])[0]
            with store.changed:
                items = [o for k, o in store.objects.items() if k[:4] == (*res, ns) and _selected(o, selector)]
                version = store.version
            return self._send(200, {"kind": f"{kind}List", "apiVersion": _api_version(res),
                                    "metadata": {"resourceVersion": str(version)}, "items": items})
        with store.changed:
            obj = store.objects.get((*res, ns, name))
        if obj is None:
            return self._not_found(kind, name)
        if sub == "log" and kind == "Pod":
            return self._log(ns, name, query)
        return self._send(200, obj)

    def do_POST(self) -> None:
        route = self._route()
        if route is None or route[2] is not None:
            return self._send(404, _status(404, "NotFound", f"no route {self.path}"))
        res, ns, _, _, _ = route
        kind, store = RESOURCES[res], self.store
        obj = self._body()
        name = (obj.get("metadata") or {}).get("name") or ""
        if obj.get("kind") != kind or obj.get("apiVersion") != _api_version(res):
            return self._send(400, _status(400, "BadRequest", f"the body is a {obj.get('kind')} "
                                           f"{obj.get('apiVersion')}, the path is for {kind} {_api_version(res)}"))
        if kind in VALIDATED:
            from smdist_launcher.backends.kubernetes.validate import validate_manifests

            try:
                validate_manifests([obj])
            except ValueError as exc:
                return self._send(422, _refusal(kind, name, exc))
        if not name:
            return self._send(422, _refusal(kind, name, ValueError("metadata.name: Required value")))
        with store.changed:
            key = (*res, ns, name)
            if key in store.objects:
                return self._send(409, _status(409, "AlreadyExists", f'{kind} "{name}" already exists',
                                               {"name": name, "kind": kind}))
            if kind == "Secret" and "stringData" in obj:   # as the API server stores it: base64 in data, write-only
                obj["data"] = {**(obj.get("data") or {}), **{k: base64.b64encode(str(v).encode()).decode()
                                                            for k, v in obj.pop("stringData").items()}}
            meta = obj.setdefault("metadata", {})
            meta.update(namespace=ns, uid=str(uuid.uuid4()), generation=1,
                        creationTimestamp=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
            store.bump(obj)
            store.objects[key] = obj
            store._record(key, "ADDED", obj)
        self._send(201, obj)

    def do_PUT(self) -> None:
        self._change(lambda old, body: body)

    def do_PATCH(self) -> None:
        if "json-patch" in (self.headers.get("Content-Type") or ""):
            return self._change(_json_patch)
        self._change(_merge)

    def _change(self, apply: Any) -> None:
        route = self._route()
        if route is None or route[2] is None:
            return self._send(404, _status(404, "NotFound", f"no route {self.path}"))
        res, ns, name, sub, _ = route
        kind, store = RESOURCES[res], self.store
        body = self._body()
        with store.changed:
            key = (*res, ns, name)
            old = store.objects.get(key)
            if old is None:
                return self._not_found(kind, name)
            if sub == "status":  # the status subresource: only status changes
                new = dict(old, status=apply(old, body).get("status"))
            else:  # the main resource: status is kept
                new = apply(old, body)
                meta = dict(new.get("metadata") or {})
                meta.update({k: old["metadata"][k] for k in ("name", "namespace", "uid", "creationTimestamp")})
                new = dict(new, metadata=meta, status=old.get("status"))
                if new.get("spec") != old.get("spec"):
                    new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            new = {k: v for k, v in new.items() if v is not None}
            store.bump(new)
            store.objects[key] = new
            store._record(key, "MODIFIED", new)
        self._send(200, new)

    def do_DELETE(self) -> None:
        route = self._route()
        if route is None or route[2] is None:
            return self._send(404, _status(404, "NotFound", f"no route {self.path}"))
        res, ns, name, _, _ = route
        kind, store = RESOURCES[res], self.store
        with store.changed:
            key = (*res, ns, name)
            obj = store.objects.pop(key, None)
            if obj is None:
                return self._not_found(kind, name)
            store.bump(obj)
            store._record(key, "DELETED", obj)
        self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                         "details": {"name": name, "kind": kind, "uid": obj["metadata"]["uid"]}})

    # --- streams -------------------------------------------------------------------------------------------------

    def _stream_start(self) -> None:
        # chunked, as an API server answers a watch: the client reads each chunk as it comes (a stream without a
        # length would be read whole, at its end)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _watch(self, res: tuple[str, str, str], ns: str, query: dict[str, list[str]]) -> None:
        store = self.store
        selector = query.get("labelSelector", [None])[0]
        since = query.get("resourceVersion", [""])[0]
        deadline = time.monotonic() + min(float(query.get("timeoutSeconds", [MAX_WATCH_S])[0]), MAX_WATCH_S)
        self._stream_start()
        with store.changed:
            if since in ("", "0"):  # no version: every object as ADDED first, as an API server does
                pending = [("ADDED", o) for k, o in store.objects.items() if k[:4] == (*res, ns)]
                cursor = len(store.events)
            else:
                cursor = next((i for i, e in enumerate(store.events) if e[0] > int(since)), len(store.events))
                pending = []
        try:
            while True:
                for kind, obj in pending:
                    if _selected(obj, selector):
                        self._chunk(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
                left = deadline - time.monotonic()
                if left <= 0:
                    return self._chunk(b"")
                with store.changed:
                    if cursor >= len(store.events):
                        store.changed.wait(min(left, 1.0))
                    events = store.events[cursor:]
                    cursor = len(store.events)
                pending = [(kind, obj) for _, key, kind, obj in events if key == (*res, ns)]
        except (BrokenPipeError, ConnectionResetError):
            return

    def _log(self, ns: str, name: str, query: dict[str, list[str]]) -> None:
        path = self.store.logs_dir / ns / f"{name}.log"
        follow = query.get("follow", ["false"])[0].lower() in ("true", "1")
        if not follow:
            return self._send(200, path.read_bytes() if path.is_file() else b"", "text/plain")
        self._stream_start()
        offset = 0
        try:
            while True:
                with self.store.changed:
                    pod = self.store.objects.get(("", "v1", "pods", ns, name))
                ended = pod is None or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES
                data = path.read_bytes()[offset:] if path.is_file() else b""
                if data:
                    offset += len(data)
                    self._chunk(data)
                if ended:
                    return self._chunk(b"")
                with self.store.changed:
                    self.store.changed.wait(0.2)
        except (BrokenPipeError, ConnectionResetError):
            return


def _api_version(res: tuple[str, str, str]) -> str:
    return f"{res[0]}/{res[1]}" if res[0] else res[1]


def serve(port: int, logs_dir: Path) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"store": Store(logs_dir)})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--logs-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    server = serve(args.port, args.logs_dir)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
