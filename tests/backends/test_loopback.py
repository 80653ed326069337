"""The preload library alone: wildcard binds land on the given loopback address; specific binds are untouched."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from smdist_launcher.backends.local.environment import host_environment
from smdist_launcher.backends.local.loopback import BIND_ADDRESS_ENV, loopback_library

from .plans import tiny_plan

PROBE = r'''
import json, socket
out = {}
s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(); out["v4_any"] = s.getsockname()[0]
s = socket.socket(); s.listen(); out["v4_listen_unbound"] = s.getsockname()[0]
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0); s.bind(("::", 0)); s.listen()
out["v6_dual"] = s.getsockname()[0]
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1); s.bind(("::", 0)); s.listen()
out["v6_only"] = s.getsockname()[0]
s = socket.socket(); s.bind(("127.0.0.1", 0)); out["specific"] = s.getsockname()[0]
print(json.dumps(out))
'''


def test_wildcard_binds_become_loopback_binds() -> None:
    env = {**os.environ, "LD_PRELOAD": str(loopback_library()), BIND_ADDRESS_ENV: "127.0.77.2"}
    out = json.loads(subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                                    timeout=60, check=True).stdout)
    assert out == {"v4_any": "127.0.77.2", "v4_listen_unbound": "127.0.77.2", "v6_dual": "::ffff:127.0.77.2",
                   "v6_only": "::1", "specific": "127.0.0.1"}


def test_only_simulated_hosts_are_confined() -> None:
    plan = tiny_plan()
    kwargs = dict(job_id="j", host_roots={}, gpus=None, checkpoint_dir="/c")
    local = host_environment(plan, "algo-1", {}, addresses={"algo-1": "127.3.0.2"}, **kwargs)
    assert local[BIND_ADDRESS_ENV] == "127.3.0.2" and local["LD_PRELOAD"].endswith(".so")
    real = host_environment(plan, "algo-1", {}, addresses={"algo-1": "10.0.0.5"}, **kwargs)  # e.g. a Slurm node
    assert BIND_ADDRESS_ENV not in real and "LD_PRELOAD" not in real
