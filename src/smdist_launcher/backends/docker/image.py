"""The smdist training image: its build context (docker/Dockerfile + this project's wheel + the native source) and
`docker build` / `docker push` through the docker CLI (no Python Docker client needed)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TAG = "smdist-train:latest"
BUILD_TIMEOUT_S = 3600
ENGINE_TIMEOUT_S = 30


class EngineUnavailable(ValueError):
    """No Docker engine answers; the message says how to get one and names the process backend."""


def project_root() -> Path:
    """The source checkout this package runs from (the image is built from it)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file() and (parent / "docker" / "Dockerfile").is_file():
            return parent
    raise FileNotFoundError("smdist image build needs a source checkout of smdist-launcher (with docker/Dockerfile "
                            "and pyproject.toml); this installation has none. Clone the project and run it there")


def docker_cli() -> str:
    cli = shutil.which("docker")
    if cli is None:
        raise EngineUnavailable("no docker CLI on PATH (Debian: apt-get install -y docker.io); without Docker use "
                                "--backend process (simulated hosts as processes)")
    return cli


def engine_answers(environ: dict[str, str] | None = None) -> str | None:
    """None when an engine answers, else why not (one line)."""
    try:
        done = subprocess.run([docker_cli(), "version", "--format", "{{.Server.Version}}"], capture_output=True,
                              text=True, timeout=ENGINE_TIMEOUT_S, env=environ, stdin=subprocess.DEVNULL)
    except EngineUnavailable as e:
        return str(e)
    except subprocess.TimeoutExpired:
        return f"the Docker engine did not answer within {ENGINE_TIMEOUT_S} s"
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["docker version failed"])[-1]
    return None


def require_engine(environ: dict[str, str] | None = None) -> None:
    why = engine_answers(environ)
    if why is not None:
        host = (environ or os.environ).get("DOCKER_HOST", "the default socket")
        raise EngineUnavailable(f"no Docker engine answers at {host}: {why}. Start dockerd (or set DOCKER_HOST), "
                                "or use --backend process (simulated hosts as processes on this machine)")


def prepare_context(dest: Path, root: Path | None = None) -> Path:
    """dest/{Dockerfile, wheels/<our wheel>, native/smddp/ce_pull.cpp}; returns dest."""
    root = root or project_root()
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "docker" / "Dockerfile", dest / "Dockerfile")
    wheels = dest / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    wheels.mkdir()
    with tempfile.TemporaryDirectory(prefix="smdist-wheel-") as work:
        # Built from a copy: setuptools writes build/ and *.egg-info next to the sources otherwise.
        src = Path(work) / "src"
        shutil.copytree(root, src, ignore=shutil.ignore_patterns(".git", ".venv", ".smdist", "__pycache__", "data",
                                                                  "build", "*.egg-info", ".pytest_cache"))
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                               "-w", str(wheels), str(src)], capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"building the smdist-launcher wheel failed: {done.stderr.strip()[-800:]}")
    native = dest / "native" / "smddp"
    native.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "native" / "smddp" / "ce_pull.cpp", native / "ce_pull.cpp")
    return dest


def context_digest(context: Path, base_image: str) -> str:
    """A content hash of the context and the base: the same inputs give the same tag (image caching)."""
    h = hashlib.sha256(base_image.encode())
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(context)).encode())
        if path.suffix == ".whl":  # a wheel holds timestamps: hash what is inside, not the zip bytes
            import zipfile

            with zipfile.ZipFile(path) as z:
                for name in sorted(z.namelist()):
                    h.update(name.encode() + z.read(name))
        else:
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


@dataclass
class BuiltImage:
    tag: str
    pushed: str | None = None


def build_image(context: Path, tag: str = DEFAULT_TAG, base_image: str | None = None, *, push: str | None = None,
                environ: dict[str, str] | None = None, quiet: bool = False) -> BuiltImage:
    """docker build (legacy builder and BuildKit alike), then optionally tag + push to `push` (an ECR URI)."""
    require_engine(environ)
    cli = docker_cli()
    argv = [cli, "build", "-t", tag, "-f", str(context / "Dockerfile")]
    if base_image:
        argv += ["--build-arg", f"BASE_IMAGE={base_image}"]
    if quiet:
        argv.append("-q")
    argv.append(str(context))
    done = subprocess.run(argv, env=environ, timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL,
                          capture_output=quiet, text=True)
    if done.returncode != 0:
        detail = f": {(done.stderr or '').strip()[-1500:]}" if quiet else " (its output is above)"
        raise RuntimeError(f"docker build of {tag} failed with exit code {done.returncode}{detail}")
    image = BuiltImage(tag)
    if push:
        for step in ([cli, "tag", tag, push], [cli, "push", push]):
            pushed = subprocess.run(step, env=environ, timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
            if pushed.returncode != 0:
                raise RuntimeError(f"{' '.join(step[1:])} failed with exit code {pushed.returncode}; for ECR log in "
                                   "first: aws ecr get-login-password | docker login --username AWS "
                                   "--password-stdin <account>.dkr.ecr.<region>.amazonaws.com")
        image.pushed = push
    return image
