"""The backend's options refuse what the API server would refuse, with the key path, before anything is rendered,
uploaded or sent: quantities, node-selector labels, images."""
from __future__ import annotations

import pytest

from smdist_launcher.backends.kubernetes.options import kubernetes_options
from smdist_launcher.errors import ValidationError


@pytest.mark.parametrize(("key", "value"), [
    ("cpu", "lots"), ("memory", "1 GiB"), ("memory", "-1Gi"), ("cpu", "4 "),
    ("node_selector", {"bad key!": "v"}), ("node_selector", {"k": "x" * 64}), ("node_selector", {"a/b/c": "v"}),
    ("node_selector", {"k": "v\n*anchor"}), ("image", "img\nx"), ("image", "img name"), ("image", ""),
])
def test_values_the_api_server_refuses_are_refused_with_their_key(key: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        kubernetes_options({key: value})
    assert [e.path for e in info.value.errors] == [f"kubernetes.{key}"]


def test_good_values_pass() -> None:
    opts = kubernetes_options({"cpu": "500m", "memory": "16Gi", "image": "123.dkr.ecr.us-east-1.amazonaws.com/s:1",
                               "node_selector": {"node.kubernetes.io/instance-type": "p4d.24xlarge", "pool": ""}})
    assert opts.cpu == "500m" and opts.memory == "16Gi"
    assert kubernetes_options({"cpu": "1.5e3"}).cpu == "1.5e3"
