"""A private Docker engine and a locally built base image for the docker backend's tests (no registry is reachable).

- PrivateEngine: dockerd (Debian docker.io) started inside a network namespace of its own
  (`nsenter --net=/run/netns/NAME`, not `ip netns exec`, which hides the cgroup mounts from dockerd), its own data
  root and socket; stopped by pid; the namespace deleted.
- base_rootfs_tar: a minimal Debian (debootstrap) with Python, Open MPI, openssh-server and torch's CPU wheel
  (installed with pip the way `pip install torch==2.13.0` finds it here), cached as a tar by content key.
  With a cold cache that takes minutes, so the suite starts it in the background at collection
  (prebuild_in_background, tests/conftest.py) and runs the docker tests last; a file lock makes the fixture wait for
  that build instead of starting a second one.
Installs nothing on the machine: docker.io and debootstrap come from scripts/bootstrap.sh."""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from smdist_launcher.backends.netns.network import kill_processes_in

SUITE = "bookworm"
MIRROR = os.environ.get("SMDIST_TEST_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# What the test base holds: the Dockerfile's apt step is then skipped (no mirror is reachable from dockerd's net).
# python3-paramiko: SDK v3's MPI driver; debootstrap does not resolve the virtual package its dependencies need
# (python3-cffi-backend-api-*), so the package providing it is named too.
DEB_PACKAGES = ("python3", "python3-pip", "python3-numpy", "python3-mpi4py", "python3-cffi-backend",
                "python3-paramiko", "openssh-server", "openssh-client", "openmpi-bin")
TORCH = "torch==2.13.0"
CACHE = Path(os.environ.get("SMDIST_TEST_CACHE") or Path.home() / ".cache" / "smdist-tests")


def missing_tools() -> list[str]:
    return [t for t in ("dockerd", "docker", "debootstrap", "ip", "nsenter") if shutil.which(t) is None]


class PrivateEngine:
    def __init__(self) -> None:
        self.state = Path(tempfile.mkdtemp(prefix="smdock-"))  # short: the socket path has a 108-byte limit
        self.netns = f"smdist-dockt-{os.getpid()}"
        self.sock = self.state / "docker.sock"
        self.env = {**os.environ, "DOCKER_HOST": f"unix://{self.sock}"}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 120) -> PrivateEngine:
        subprocess.run(["ip", "netns", "add", self.netns], check=True, timeout=30)
        subprocess.run(["ip", "-n", self.netns, "link", "set", "lo", "up"], check=True, timeout=30)
        log = open(self.state / "dockerd.log", "wb")  # noqa: SIM115 - dockerd writes to it until stop()
        self.proc = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self.netns}", "dockerd", "--data-root", str(self.state / "data"),
             "--exec-root", str(self.state / "exec"), "-H", self.env["DOCKER_HOST"], "--pidfile",
             str(self.state / "dockerd.pid"), "--storage-driver", "overlay2"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while self.docker("version", check=False).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.state / "dockerd.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"dockerd did not come up: {tail}")
            time.sleep(0.25)
        return self

    def docker(self, *args: str, check: bool = True, timeout: float = 600,
               input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["docker", *args], env=self.env, capture_output=True, check=check, timeout=timeout,
                              input=input)

    def containers(self) -> list[str]:
        return self.docker("ps", "-aq", check=False).stdout.decode().split()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            ids = self.containers()
            if ids:
                self.docker("rm", "-f", *ids, check=False)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        kill_processes_in([self.netns])  # containerd and its shims live in the namespace too
        subprocess.run(["ip", "netns", "del", self.netns], check=False, timeout=30)
        # overlay mounts dockerd may have left under its data root
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
                  if line.split()[1].startswith(str(self.state))]
        for target in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", target], check=False, timeout=30)
        shutil.rmtree(self.state, ignore_errors=True)


def base_key() -> str:
    return hashlib.sha256(repr((SUITE, DEB_PACKAGES, TORCH, sys.version_info[:2])).encode()).hexdigest()[:16]


def _base_tar() -> Path:
    return CACHE / f"base-{base_key()}.tar"


def base_rootfs_tar() -> Path:
    """The cached rootfs tar of the test base image; built (debootstrap + pip) when the cache lacks it."""
    tar = _base_tar()
    if tar.is_file():
        return tar
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(tar.with_suffix(".lock"), "w") as lock:
        _lock(lock, timeout_s=LOCK_WAIT_S)   # a background prebuild holds it until its tar is in place
        if not tar.is_file():
            _build(tar)
    return tar


# the build's own steps are bounded (debootstrap, pip and tar: 30 + 30 + 15 min at most)
LOCK_WAIT_S = 80 * 60


def _lock(f, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"another build of the docker test base held {f.name} for {timeout_s:.0f} s") from None
            time.sleep(1)


def prebuild_in_background(log: Path) -> subprocess.Popen[bytes] | None:
    """Start building the base tar in a process of its own when it is missing and the docker tests can run at all
    (the caller stops it by pid at the end of the session)."""
    if _base_tar().is_file() or os.geteuid() != 0 or missing_tools():
        return None
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, __file__], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def stop_prebuild(proc: subprocess.Popen[bytes]) -> None:
    """Stop an unfinished prebuild (its whole process group, by pid) and remove its half-made rootfs."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    _remove_leftovers()


def _remove_leftovers() -> None:
    """Half-made rootfs folders of an interrupted build; debootstrap may have left /proc and /sys mounted in them,
    so those are unmounted (deepest first) before anything is deleted."""
    leftovers = sorted(CACHE.glob("smdist-base-*"))
    if not leftovers:
        return
    with open("/proc/self/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for mount in sorted(mounts, key=len, reverse=True):
        if any(mount.startswith(f"{d}/") for d in map(str, leftovers)):
            subprocess.run(["umount", "-l", mount], check=False, capture_output=True, timeout=60)
    for folder in leftovers:
        shutil.rmtree(folder, ignore_errors=True)


def _build(tar: Path) -> None:
    _remove_leftovers()   # we hold the lock: nobody else is building
    with tempfile.TemporaryDirectory(prefix="smdist-base-", dir=CACHE) as work:
        rootfs = Path(work) / "rootfs"
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(DEB_PACKAGES)}", SUITE,
                        str(rootfs), MIRROR], check=True, capture_output=True, timeout=1800)
        py = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target",
                        str(rootfs / "usr" / "local" / "lib" / py / "dist-packages"), TORCH],
                       check=True, capture_output=True, timeout=1800)
        partial = tar.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], check=True, timeout=900)
        partial.rename(tar)
    return tar


def import_base(engine: PrivateEngine, tar: Path) -> str:
    tag = f"smdist-test-base:{tar.stem.removeprefix('base-')}"
    if engine.docker("image", "inspect", tag, check=False).returncode != 0:
        with open(tar, "rb") as f:
            subprocess.run(["docker", "import", "-c",
                            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "-", tag],
                           env=engine.env, stdin=f, check=True, capture_output=True, timeout=900)
    return tag


if __name__ == "__main__":   # the background prebuild
    print(base_rootfs_tar(), flush=True)
