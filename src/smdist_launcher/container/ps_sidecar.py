"""The parameter-server process a `ps` host runs in the background next to its worker (the TF toolkit's layout).

It lives and dies with the worker: started before it, stopped when it ends; if the parameter server exits on its
own first (it never should: `join()` does not return), the worker is stopped and the host fails naming the PS."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .addressing import PS_TF_CONFIG_ENV
from .failure import TAIL_LINES, signal_name

PS_MODULE = "smdist_launcher.container.parameter_server"


def ps_env(env: dict[str, str]) -> dict[str, str]:
    """The worker's environment with the PS's TF_CONFIG; no GPUs (the toolkit gives its PS device_count GPU=0)."""
    ps_config = env.get(PS_TF_CONFIG_ENV)
    if not ps_config:
        raise ValueError(f"role 'ps' needs ${PS_TF_CONFIG_ENV} (the parameter server's TF_CONFIG) in the host's "
                         "env; plans from plan/planner.py set it: rebuild the plan")
    return {**env, "TF_CONFIG": ps_config, "CUDA_VISIBLE_DEVICES": ""}


class ParameterServerSidecar:
    def __init__(self, env: dict[str, str], cwd: str, say: Callable[[str], None],
                 on_early_exit: Callable[[], None]) -> None:
        self.command = [sys.executable, "-m", PS_MODULE]
        self.say = say
        self.on_early_exit = on_early_exit
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.exit_code: int | None = None  # set only when it exited on its own
        self.exit_time_ns: int | None = None
        self._stopping = threading.Event()
        # Same process group as the runtime (no new session): the runtime's SIGTERM/cleanup sweep covers it.
        self.proc = subprocess.Popen(self.command, env=ps_env(env), cwd=cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        say(f"parameter server started (pid {self.proc.pid}): {' '.join(self.command)}")
        self._relay = threading.Thread(target=self._relay_output, name="ps-output", daemon=True)
        self._relay.start()

    def _relay_output(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            self.tail.append(line)
            self.say(f"ps: {line}")
        code = self.proc.wait()
        if self._stopping.is_set():
            return
        self.exit_time_ns, self.exit_code = time.time_ns(), code
        self.say(f"the parameter server exited on its own (code {code}) while the worker ran: stopping the worker")
        self.on_early_exit()

    def diagnosis(self, host: str) -> dict[str, Any]:
        """failure.json for a parameter server that died first (call after `exit_code` is set)."""
        code = self.exit_code if self.exit_code is not None else 1
        sig = signal_name(-code) if code < 0 else None
        summary = (f"the parameter server of {host} ({' '.join(self.command)}) exited with code {code}"
                   + (f" ({sig})" if sig else "") + " before the worker finished")
        return {"host": host, "reported_by": host, "rank": None, "exit_code": code, "signal": sig,
                "time": self.exit_time_ns or time.time_ns(), "traceback": [*self.tail, summary],
                "likely_victim": False, "command": self.command}

    def expect_exit(self) -> None:
        """From now on its exit is ours (the host is being stopped), not a failure."""
        self._stopping.set()

    def stop(self, grace_s: float) -> None:
        """SIGTERM, SIGKILL after `grace_s`."""
        self.expect_exit()
        if self.proc.returncode is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            except (ProcessLookupError, ChildProcessError):
                pass
        self._relay.join(grace_s)


def stop_process(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM then SIGKILL one child another thread is waiting for (only signals: that thread reaps it)."""
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while proc.returncode is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.returncode is None:
        proc.kill()
