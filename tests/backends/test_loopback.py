"""The preload library alone: wildcard binds land on the given loopback address; specific binds are untouched."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from smdist_launcher.backends.local.host_environment import host_environment
from smdist_launcher.backends.local.loopback import BIND_ADDRESS_ENV, loopback_library

from .plans import tiny_plan

PROBE = r'''
import json, socket
out = {}
s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(); out["v4_any"] = s.getsockname()[0]
s = socket.socket(); s.listen(); out["v4_listen_unbound"] = s.getsockname()[0]
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", 0)); s.listen()
out["v6_dual"] = s.getsockname()[0]
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
s.bind(("::", 0)); s.listen()
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


LOOKUPS = r'''
import json, socket, sys
out = {}
for addr in sys.argv[1:]:
    sa = (addr, 80, 0, 0) if ":" in addr else (addr, 80)
    try:
        out[addr] = socket.getnameinfo(sa, socket.NI_NUMERICSERV)[0]
    except socket.gaierror as e:
        out[addr] = e.errno
try:
    out["algo-2"] = socket.gethostbyname("algo-2")
except socket.gaierror as e:
    out["algo-2"] = e.errno
print(json.dumps(out))
'''


def test_the_jobs_names_and_addresses_resolve_both_ways_without_dns(tmp_path) -> None:
    """torch's TCPStore reverse-resolves every peer it accepts (c10d: "The hostname of the client socket cannot be
    retrieved. err=-3" when that fails); a dual-stack listener sees IPv4-mapped peers."""
    from .dead_dns import dead_dns_prefix

    prefix = dead_dns_prefix(tmp_path)
    addresses = ["127.0.77.2", "::ffff:127.0.77.3", "::ffff:127.0.0.1", "127.0.77.9"]
    host_map = json.dumps({"algo-1": "127.0.77.2", "algo-2": "127.0.77.3"})

    def lookups(env: dict[str, str]) -> dict[str, object]:
        done = subprocess.run([*prefix, sys.executable, "-c", LOOKUPS, *addresses], env=env, capture_output=True,
                              text=True, timeout=60, check=True)
        return json.loads(done.stdout)

    plain = lookups({**os.environ, "SMDIST_HOST_MAP": host_map})
    assert plain["::ffff:127.0.77.3"] == socket.EAI_AGAIN, plain  # what the job's processes met without the library
    confined = lookups({**os.environ, "SMDIST_HOST_MAP": host_map, "LD_PRELOAD": str(loopback_library())})
    assert confined == {"127.0.77.2": "algo-1", "::ffff:127.0.77.3": "algo-2", "::ffff:127.0.0.1": "localhost",
                        "127.0.77.9": "127.0.77.9", "algo-2": "127.0.77.3"}


EXIT_PROBE = r'''
import os, sys
folder = sys.argv[1]
if sys.argv[2] == "rank":  # what the compat sitecustomize does for a rank at start-up
    open(os.path.join(folder, f"{os.getpid()}.txt"), "w").write("{}\n")
print(os.getpid())
sys.exit(int(sys.argv[3]))
'''


def test_a_rank_that_exits_leaves_its_exit_code_and_time(tmp_path) -> None:
    import time

    env = {**os.environ, "LD_PRELOAD": str(loopback_library()), "SMDIST_STACKS_DIR": str(tmp_path)}
    before = time.time_ns()
    rank = subprocess.run([sys.executable, "-c", EXIT_PROBE, str(tmp_path), "rank", "3"], env=env,
                          capture_output=True, text=True, timeout=60)
    helper = subprocess.run([sys.executable, "-c", EXIT_PROBE, str(tmp_path), "helper", "0"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert rank.returncode == 3 and helper.returncode == 0
    note = json.loads((tmp_path / f"{rank.stdout.strip()}.exit").read_text())
    assert note["pid"] == int(rank.stdout) and note["code"] == 3
    assert before <= note["time_ns"] <= time.time_ns()
    assert not (tmp_path / f"{helper.stdout.strip()}.exit").exists()  # not a registered rank: nothing written
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"{rank.stdout.strip()}.txt",
                                                                 f"{rank.stdout.strip()}.exit"])
