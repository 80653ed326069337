"""TF_CONFIG for TensorFlow's parameter-server and multi-worker-mirrored layouts (sagemaker-tensorflow-training-toolkit
``_build_tf_config_for_ps`` / ``_build_tf_config_for_mwms``).

The cluster part is the same on every host, so it is encoded once and only the task part is formatted per host
(1,000 hosts would otherwise re-encode a 1,000-entry cluster 1,000 times).
"""
from __future__ import annotations

import json

WORKER_PORT = 2222
PS_PORT = 2223
MWMS_PORT = 8890


def _addresses(hosts: list[str], port: int) -> list[str]:
    return [f"{h}:{port}" for h in hosts]


def _with_task(cluster_json: str, task_type: str, index: int) -> str:
    return f'{{"cluster": {cluster_json}, "environment": "cloud", "task": {{"index": {index}, "type": "{task_type}"}}}}'


def ps_cluster_json(hosts: list[str]) -> str:
    """master = first host, workers = the others, a parameter server on every host (only with more than one host)."""
    cluster: dict[str, list[str]] = {"master": _addresses(hosts[:1], WORKER_PORT)}
    if len(hosts) > 1:
        cluster["ps"] = _addresses(hosts, PS_PORT)
        cluster["worker"] = _addresses(hosts[1:], WORKER_PORT)
    return json.dumps(cluster)


def ps_worker_tf_config(cluster_json: str, host_index: int) -> str:
    """TF_CONFIG of the training process on host ``host_index``: task master/0 on the first host, worker/i-1
    elsewhere."""
    if host_index == 0:
        return _with_task(cluster_json, "master", 0)
    return _with_task(cluster_json, "worker", host_index - 1)


def ps_server_tf_config(cluster_json: str, host_index: int) -> str:
    """TF_CONFIG of the parameter-server process the toolkit starts next to the worker on each host."""
    return _with_task(cluster_json, "ps", host_index)


def mwms_cluster_json(hosts: list[str]) -> str:
    return json.dumps({"worker": _addresses(hosts, MWMS_PORT)})


def mwms_tf_config(cluster_json: str, host_index: int) -> str:
    return _with_task(cluster_json, "worker", host_index)
