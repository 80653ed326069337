"""A simulated host's name and address resolve both ways inside a local job, also where no DNS server can be
reached: torch's TCPStore reverse-resolves every peer it accepts, and printed "[c10d] The hostname of the client
socket cannot be retrieved. err=-3" on every rank when that lookup went to an unreachable DNS server."""
from __future__ import annotations

import json
import subprocess
import sys

from backends.dead_dns import dead_dns_prefix

SCRIPT = r'''
import socket
dist.init_process_group("gloo")
dist.all_reduce(torch.ones(1))
me = os.environ["SM_CURRENT_HOST"]
print("lookups", json.dumps({"name": me, "address": socket.gethostbyname(me),
                             "back": socket.getnameinfo((socket.gethostbyname(me), 0), 0)[0]}), flush=True)
dist.barrier()
'''


def test_two_host_job_logs_no_c10d_hostname_warning_without_dns(ws):
    prefix = dead_dns_prefix(ws.root)
    plan = ws.plan(SCRIPT, strategy="torch_distributed", pph=1)
    plan_file = ws.root / "plan.json"
    plan_file.write_text(plan.to_json(reveal_secrets=True))
    driver = ("from smdist_launcher.plan.model import LaunchPlan\nfrom smdist_launcher.backends.local import run_job\n"
              f"run_job(LaunchPlan.from_json(open({str(plan_file)!r}).read()), "
              f"jobs_root={str(ws.jobs)!r}, logs=False)\n")
    done = subprocess.run([*prefix, sys.executable, "-c", driver], capture_output=True, text=True, timeout=300,
                          cwd=ws.outside)
    assert done.returncode == 0, done.stdout + done.stderr
    logs = {h: (ws.jobs / plan.job_name / "logs" / f"{h}.log").read_text() for h in ("algo-1", "algo-2")}
    for host, text in logs.items():
        assert "cannot be retrieved" not in text, text
        line = next(ln for ln in text.splitlines() if " lookups " in ln)
        found = json.loads(line.split(" lookups ", 1)[1])
        record = json.loads((ws.jobs / plan.job_name / "job.json").read_text())
        assert found == {"name": host, "address": record["hosts"][host]["address"], "back": host}
