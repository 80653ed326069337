"""`python -m smdist_launcher.container.parameter_server`: the TensorFlow parameter server of a `ps` host.

What sagemaker-tensorflow-training-toolkit's `_run_ps` does next to the worker: `tf.distribute.Server` for task
ps/<i> of the cluster in $TF_CONFIG, then `join()` (it never returns). TensorFlow is imported here, lazily: the
runtime itself needs only the stdlib."""
from __future__ import annotations

import json
import os
import sys
from typing import Any

EXIT_BAD_CONFIG = 2
EXIT_NO_TENSORFLOW = 3


def ps_task(text: str | None) -> tuple[dict[str, Any], int]:
    """(cluster spec, task index) from a parameter server's TF_CONFIG; ValueError says what is wrong."""
    if not text:
        raise ValueError("$TF_CONFIG is empty: the runtime sets it from the plan's SMDIST_PS_TF_CONFIG "
                         "(plan/tf_config.ps_server_tf_config)")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"$TF_CONFIG is not valid JSON ({e}): {text!r}") from e
    cluster = data.get("cluster") if isinstance(data, dict) else None
    task = data.get("task") if isinstance(data, dict) else None
    if not isinstance(cluster, dict) or not isinstance(cluster.get("ps"), list):
        raise ValueError(f"$TF_CONFIG.cluster must hold a 'ps' address list, got {cluster!r}")
    if not isinstance(task, dict) or task.get("type") != "ps" or not isinstance(task.get("index"), int):
        raise ValueError(f"$TF_CONFIG.task must be {{'type': 'ps', 'index': <int>}}, got {task!r}")
    if not 0 <= task["index"] < len(cluster["ps"]):
        raise ValueError(f"$TF_CONFIG.task.index {task['index']} is outside cluster.ps ({len(cluster['ps'])} entries)")
    return cluster, task["index"]


def main() -> int:
    try:
        cluster, index = ps_task(os.environ.get("TF_CONFIG"))
    except ValueError as e:
        print(f"parameter server: {e}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG
    try:
        import tensorflow as tf  # the job's framework, not ours: only this process needs it
    except ImportError as e:
        print(f"parameter server: TensorFlow is not importable by {sys.executable} ({type(e).__name__}: {e}). "
              "distribution parameter_server runs tf.distribute.Server on every host: use a TensorFlow training "
              "image or add tensorflow to requirements.txt in source_dir.", file=sys.stderr, flush=True)
        return EXIT_NO_TENSORFLOW
    print(f"starting TensorFlow parameter server ps/{index} at {cluster['ps'][index]}", flush=True)
    server = tf.distribute.Server(cluster, job_name="ps", task_index=index, protocol="grpc")
    server.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
