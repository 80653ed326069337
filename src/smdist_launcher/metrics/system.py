"""System metrics per host, named as SageMaker names its host metrics (kind "system", rank None):

    CPUUtilization        the host's processes' CPU, summed over cores (0..100 x cores, as SageMaker's)
    MemoryUtilization     their resident memory, % of this machine's memory
    DiskUtilization       % used of the file system holding the host's /opt/ml
    GPUUtilization        the host's GPUs' utilization, summed (0..100 x GPUs, as SageMaker's)
    GPUMemoryUtilization  their memory used, summed % (0..100 x GPUs)
    GPUUtilization.<i>, GPUMemoryUtilization.<i>   the same for GPU <i> alone (NVML's index)

A simulated host (process, netns) shares this machine with the others, so CPU and memory are those of its own process
tree (its root process and every descendant), not the machine's. GPU metrics come from NVML (`nvidia-ml-py`, imported
only when sampling starts) for the GPUs the host was given; without NVML or GPUs there are none. psutil is imported
when sampling starts, never at import."""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .store import SYSTEM, MetricPoint

DEFAULT_INTERVAL_S = 5.0
FIRST_SAMPLE_S = 1.0
CPU, MEMORY, DISK = "CPUUtilization", "MemoryUtilization", "DiskUtilization"
GPU, GPU_MEMORY = "GPUUtilization", "GPUMemoryUtilization"


@dataclass
class SampledHost:
    """One host to sample: the root process of its tree, where its /opt/ml is, and its GPUs (NVML indices)."""

    name: str
    pid: int
    disk_path: str | None = None
    gpus: list[int] = field(default_factory=list)
    # where the root is found when `pid` is not it (a docker container's first process: the launcher only sees the
    # docker client); asked again whenever the root it gave is gone, None while there is none yet
    locate: Callable[[], int | None] | None = None
    _procs: dict[int, Any] = field(default_factory=dict)  # psutil.Process by pid: cpu_percent needs the same object


def children_by_parent(proc: str = "/proc") -> dict[int, list[int]] | None:
    """Every process's children, from one pass over /proc (Linux); None elsewhere. One pass serves every host of a
    sample: psutil's children() makes that pass once per call."""
    try:
        names = os.listdir(proc)
    except OSError:
        return None
    out: dict[int, list[int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone since listdir
            continue
        fields = stat[stat.rfind(b")") + 2:].split(b" ", 2)  # after the command name: state, ppid, ...
        if len(fields) >= 2 and fields[1].isdigit():
            out.setdefault(int(fields[1]), []).append(int(name))
    return out


def _descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    found, todo = [], list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, ()))
    return found


class _Nvml:
    """NVML handles, or nothing when the library or a GPU is missing (CI, CPU machines)."""

    def __init__(self) -> None:
        self.lib: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            if pynvml.nvmlDeviceGetCount() > 0:
                self.lib = pynvml
        except Exception:  # noqa: BLE001 - no module, no driver, no device: no GPU metrics
            self.lib = None

    def sample(self, index: int) -> tuple[float, float] | None:
        """(utilization %, memory used %) of GPU `index`, None when NVML cannot tell."""
        if self.lib is None:
            return None
        try:
            handle = self.lib.nvmlDeviceGetHandleByIndex(index)
            util = self.lib.nvmlDeviceGetUtilizationRates(handle)
            mem = self.lib.nvmlDeviceGetMemoryInfo(handle)
            return float(util.gpu), 100.0 * float(mem.used) / float(mem.total or 1)
        except Exception:  # noqa: BLE001 - a GPU that fell off the bus must not stop the sampling
            return None

    def close(self) -> None:
        if self.lib is not None:
            try:
                self.lib.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass


class SystemSampler:
    """Samples each host every `interval_s` in a thread and hands the points to `sink`."""

    def __init__(self, hosts: list[SampledHost], sink: Callable[[list[MetricPoint]], None], *,
                 interval_s: float = DEFAULT_INTERVAL_S, gpus: bool = True) -> None:
        import psutil  # here, not at import: the SDK layer imports this module without needing psutil

        self._psutil = psutil
        self.hosts = hosts
        self.sink = sink
        self.interval_s = interval_s
        self._total_memory = float(psutil.virtual_memory().total)
        self._nvml = _Nvml() if gpus and any(h.gpus for h in hosts) else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        children = children_by_parent()
        for host in self.hosts:  # primes cpu_percent: its first call on a process has nothing to compare with
            self._tree(host, children)
        self._thread = threading.Thread(target=self._loop, name="smdist-system-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 5)
        if self._nvml is not None:
            self._nvml.close()

    def _loop(self) -> None:
        wait = min(FIRST_SAMPLE_S, self.interval_s)  # a short job gets a sample too
        while not self._stop.wait(wait):
            self.sink(self.sample())
            wait = self.interval_s

    def _tree(self, host: SampledHost, children: dict[int, list[int]] | None = None) -> list[Any]:
        """The host's live processes (root and descendants), the same psutil objects from sample to sample.
        children: children_by_parent() of this sample (None: psutil finds them)."""
        ps = self._psutil
        try:
            root = host._procs.get(host.pid)
            if root is None or not root.is_running():
                if host.locate is not None:
                    located = host.locate()
                    if located is None:
                        host._procs.clear()
                        return []
                    host.pid = located
                root = ps.Process(host.pid)
            if children is None:
                found = [root, *root.children(recursive=True)]
            else:
                found = [root]
                for pid in _descendants(root.pid, children):
                    try:
                        found.append(host._procs.get(pid) or ps.Process(pid))
                    except (ps.NoSuchProcess, ps.AccessDenied):
                        continue
        except (ps.NoSuchProcess, ps.AccessDenied):
            host._procs.clear()
            return []
        procs = {p.pid: host._procs.get(p.pid, p) for p in found}
        for p in procs.values():
            if p.pid not in host._procs:
                try:
                    p.cpu_percent(None)  # primed now; its CPU counts from the next sample on
                except (ps.NoSuchProcess, ps.AccessDenied):
                    pass
        host._procs = procs
        return list(procs.values())

    def sample(self) -> list[MetricPoint]:
        """One point per metric per host, now."""
        ps = self._psutil
        now = time.time()
        points: list[MetricPoint] = []
        children = children_by_parent()
        for host in self.hosts:
            known = set(host._procs)
            cpu = rss = 0.0
            for p in self._tree(host, children):
                try:
                    with p.oneshot():
                        if p.pid in known:
                            cpu += p.cpu_percent(None)
                        rss += p.memory_info().rss
                except (ps.NoSuchProcess, ps.AccessDenied):
                    continue
            points.append(MetricPoint(CPU, round(cpu, 2), now, host.name, kind=SYSTEM))
            points.append(MetricPoint(MEMORY, round(100.0 * rss / self._total_memory, 3), now, host.name,
                                      kind=SYSTEM))
            if host.disk_path:
                try:
                    disk = ps.disk_usage(host.disk_path).percent
                    points.append(MetricPoint(DISK, float(disk), now, host.name, kind=SYSTEM))
                except OSError:
                    pass
            points += self._gpu_points(host, now)
        return points

    def _gpu_points(self, host: SampledHost, now: float) -> list[MetricPoint]:
        if self._nvml is None or not host.gpus:
            return []
        points = []
        util_sum = mem_sum = 0.0
        seen = 0
        for index in host.gpus:
            got = self._nvml.sample(index)
            if got is None:
                continue
            util, mem = got
            util_sum, mem_sum, seen = util_sum + util, mem_sum + mem, seen + 1
            points.append(MetricPoint(f"{GPU}.{index}", util, now, host.name, kind=SYSTEM))
            points.append(MetricPoint(f"{GPU_MEMORY}.{index}", round(mem, 3), now, host.name, kind=SYSTEM))
        if seen:
            points.append(MetricPoint(GPU, util_sum, now, host.name, kind=SYSTEM))
            points.append(MetricPoint(GPU_MEMORY, round(mem_sum, 3), now, host.name, kind=SYSTEM))
        return points
