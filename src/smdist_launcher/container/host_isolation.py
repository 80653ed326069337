"""Give one simulated host its own /opt/ml, hostname and /etc/hosts when local mode runs it on this machine.

SageMaker scripts write to absolute /opt/ml/... paths and read the job through sagemaker_training, which looks at
/opt/ml; Open MPI names its shared-memory files after gethostname(). On one machine every simulated host would
share all three. As root, the host's runtime process moves itself (before it starts any user process, which
inherit it) into a private mount namespace, where its sandbox tree is bind-mounted on /opt/ml, and a private UTS
namespace, where gethostname() is the host's name (algo-N); a private /etc/hosts resolves algo-N to the hosts'
addresses as on a SageMaker cluster. The machine's own /opt/ml is never written: when it does not exist, the
mount point is made inside a tmpfs-backed overlay of /opt that only this namespace sees.

Without the privilege (not root, or unshare refused as in many containers) nothing changes: scripts still get
their host's tree through SAGEMAKER_BASE_DIR and the SM_* paths, but absolute /opt/ml paths are not isolated.

Stdlib only (ctypes): the runtime imports it. unshare(CLONE_NEWNS) must run while the process has one thread."""
from __future__ import annotations

import ctypes
import errno
import ipaddress
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

CONTAINER_ROOT = "/opt/ml"
# "off" keeps every host in this machine's namespaces (debugging, or to see the fallback); default "auto".
ISOLATION_ENV = "SMDIST_HOST_ISOLATION"
HOSTS_FILE = "/etc/hosts"

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 2


@dataclass(frozen=True)
class HostIsolation:
    """What isolate_host achieved for this process and its descendants."""

    opt_ml: bool = False        # /opt/ml is this host's sandbox tree
    hostname: bool = False      # gethostname() is the host's name
    hosts_file: bool = False    # /etc/hosts maps every algo-N to its address
    reason: str = ""            # why /opt/ml is not isolated ("" when it is)

    def seen_root(self, root: str | os.PathLike[str]) -> Path:
        """The host's tree `root` as its user processes see it: /opt/ml where it is mounted there, else `root`."""
        return Path(CONTAINER_ROOT) if self.opt_ml else Path(root)

    def fallback_note(self, root: str | os.PathLike[str]) -> str:
        """One paragraph for the job's console when absolute /opt/ml is shared."""
        return (f"absolute /opt/ml paths are NOT private to each simulated host ({self.reason}): every host "
                f"sees this machine's /opt/ml. Scripts still find their host's tree through SAGEMAKER_BASE_DIR "
                f"and the SM_* paths (this host: {root}); scripts that write /opt/ml/... themselves share one "
                "folder. Run as root (with CAP_SYS_ADMIN) for a private /opt/ml and hostname per host.")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def unshare(flags: int) -> None:
    """unshare(2) for this process (must be single-threaded for CLONE_NEWNS)."""
    _check(_libc().unshare(ctypes.c_int(flags)), "unshare")


def _fsencode(s: str | None) -> bytes | None:
    return None if s is None else os.fsencode(s)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = _fsencode
    _check(_libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source or fstype} on {target}")


def make_mounts_private() -> None:
    """Nothing mounted from here on propagates back to the machine's namespace."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def bind_mount(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    mount(os.fspath(source), os.fspath(target), None, MS_BIND | MS_REC)


def detach(target: str | os.PathLike[str]) -> None:
    """Lazy unmount: the mount leaves the tree; what still uses it (an overlay's layers) keeps it alive."""
    _check(_libc().umount2(os.fsencode(os.fspath(target)), ctypes.c_int(MNT_DETACH)), f"umount {target}")


def set_hostname(name: str) -> None:
    raw = name.encode()
    _check(_libc().sethostname(raw, ctypes.c_size_t(len(raw))), "sethostname")


def _has_submounts(path: str) -> bool:
    prefix = path.rstrip("/") + "/"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            return any(line.split()[4].startswith(prefix) for line in f)
    except OSError:
        return True


def _mount_point(target: str, scratch: Path) -> None:
    """Make `target` exist inside this (private) namespace without writing to the machine: an overlay of its
    parent whose writable layer is a tmpfs only this namespace sees."""
    if os.path.isdir(target):
        return
    parent = os.path.dirname(target.rstrip("/"))
    if not os.path.isdir(parent) or parent == "/" or _has_submounts(parent):
        # An overlay would hide the parent's submounts (or the whole root): refuse rather than change the machine.
        raise OSError(errno.ENOENT, f"{target} does not exist and {parent} cannot be overlaid; create {target} "
                                    "(an empty folder) once as root")
    layer = Path(tempfile.mkdtemp(prefix="ns-", dir=scratch))
    mount("tmpfs", str(layer), "tmpfs", 0, "mode=0755")
    (layer / "upper").mkdir()
    (layer / "work").mkdir()
    mount("overlay", parent, "overlay", 0, f"lowerdir={parent},upperdir={layer / 'upper'},workdir={layer / 'work'}")
    os.mkdir(target)
    detach(layer)  # the overlay keeps the tmpfs alive; the scratch folder is left empty
    layer.rmdir()


def hosts_file_text(addresses: dict[str, str], base: str = "") -> str:
    """This machine's /etc/hosts plus one line per simulated host, and for an IPv4 host its IPv4-mapped IPv6 form
    after all of them: a dual-stack listener (torch's TCPStore) sees its peers as ::ffff:a.b.c.d, and glibc reads
    IPv4 lines for IPv4 lookups only, so the reverse lookup went to DNS and failed ("The hostname of the client
    socket cannot be retrieved"). Forward lookups still list the IPv4 address first."""
    lines = [base.rstrip("\n")] if base.strip() else []
    lines += [f"{address}\t{host}" for host, address in sorted(addresses.items())]
    lines += [f"::ffff:{address}\t{host}" for host, address in sorted(addresses.items()) if _is_ipv4(address)]
    return "\n".join(lines) + "\n"


def _is_ipv4(address: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(address), ipaddress.IPv4Address)
    except ValueError:
        return False


def needed(root: str | os.PathLike[str], local_hosts: dict[str, str]) -> bool:
    """Local mode (its hosts on this machine) and a sandbox root that is not /opt/ml itself. One host too: its
    absolute /opt/ml/model and /opt/ml/checkpoints writes went to the machine's /opt/ml, never packed nor synced, and
    shared by every one-host job running at once."""
    return (len(local_hosts) >= 1 and sys.platform.startswith("linux")
            and os.path.realpath(root) != os.path.realpath(CONTAINER_ROOT))


def turned_off(environ: dict[str, str]) -> bool:
    return environ.get(ISOLATION_ENV, "auto").strip().lower() in ("off", "0", "false", "no")


def isolate_host(host: str, root: str | os.PathLike[str], *, addresses: dict[str, str] | None = None,
                 scratch: str | os.PathLike[str] | None = None,
                 environ: dict[str, str] | None = None) -> HostIsolation:
    """Move this process into private mount + UTS namespaces: `root` on /opt/ml, hostname `host`, and (with
    `addresses`, {host: address}) an /etc/hosts naming every host. Never raises: the result says what worked.
    `scratch`: a folder for the overlay's tmpfs when /opt/ml must be created (default: the temp folder)."""
    environ = dict(os.environ) if environ is None else environ
    if turned_off(environ):
        return HostIsolation(reason=f"turned off by {ISOLATION_ENV}={environ[ISOLATION_ENV]}")
    if os.geteuid() != 0:
        return HostIsolation(reason="not running as root")
    try:
        unshare(CLONE_NEWNS | CLONE_NEWUTS)
    except OSError as e:
        return HostIsolation(reason=f"unshare of the mount and UTS namespaces was refused ({e.strerror})")
    hostname = hosts_file = False
    try:
        set_hostname(host)
        hostname = True
    except OSError:
        pass
    try:
        make_mounts_private()
        _mount_point(CONTAINER_ROOT, Path(scratch or tempfile.gettempdir()))
        bind_mount(root, CONTAINER_ROOT)
    except OSError as e:
        return HostIsolation(hostname=hostname, reason=str(e))
    if addresses and os.path.isfile(HOSTS_FILE):
        try:
            fd, private = tempfile.mkstemp(prefix="hosts-", dir=scratch)
            with os.fdopen(fd, "w") as f:
                f.write(hosts_file_text(addresses, Path(HOSTS_FILE).read_text()))
            os.chmod(private, 0o644)
            bind_mount(private, HOSTS_FILE)
            os.unlink(private)  # the mount holds the file
            hosts_file = True
        except OSError:
            pass
    return HostIsolation(opt_ml=True, hostname=hostname, hosts_file=hosts_file)


def scratch_env(scratch: str | os.PathLike[str], *, mpi_master: bool = False) -> dict[str, str]:
    """A host's own temp folder for everything that names files after the hostname and the local rank: tempfile,
    Open MPI's session directory (orted's unix sockets) and its shared-memory backing files (vader, mmap).

    The MPI master's mpirun forwards the OMPI_MCA_* of its environment to every rank of every host (after the
    orted's own environment), so it gets TMPDIR only: its ranks keep Open MPI's defaults, and each worker's ranks
    keep their orted's values."""
    path = os.fspath(scratch)
    if mpi_master:
        return {"TMPDIR": path}
    return {"TMPDIR": path, **{f"OMPI_MCA_{name}": path for name in HOST_LOCAL_MCA}}


# Open MPI settings that must name THIS host's folder. mpirun hands the OMPI_MCA_* of its own environment to every
# orted as `-mca NAME VALUE` (which beats the orted's environment), so a worker host puts its own values back.
HOST_LOCAL_MCA = ("orte_tmpdir_base", "btl_vader_backing_directory", "shmem_mmap_backing_file_base_dir")


def localize_orted_argv(argv: list[str], env: dict[str, str]) -> list[str]:
    """orted's argv with the host-local Open MPI settings taken from this host's `env` (OMPI_MCA_<name>)."""
    out = list(argv)
    for i in range(len(out) - 2):
        if out[i] in ("-mca", "--mca") and out[i + 1] in HOST_LOCAL_MCA and f"OMPI_MCA_{out[i + 1]}" in env:
            out[i + 2] = env[f"OMPI_MCA_{out[i + 1]}"]
    return out
