"""``smdist image build [--base-image IMG] [--tag T] [--push ECR_URI] [--context DIR]``: the training image.

Prepares the build context (docker/Dockerfile, this project's wheel, the native source) and runs `docker build`
(and `docker tag` + `docker push` with --push) where an engine answers. `--context DIR --no-build` only writes the
context (to build elsewhere). Exit codes: 0 built, 1 the build failed, 2 no engine / bad input."""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .console import problem

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("image", help="build the smdist training image (docker/Dockerfile)",
                              description="Build the training image whose entry point, smdist-train, runs the plan "
                                          "shipped with each job (on SageMaker or with --backend docker).")
    sub = p.add_subparsers(dest="image_command", metavar="ACTION", required=True)
    b = sub.add_parser("build", help="prepare the context and run docker build [and push]")
    b.add_argument("--base-image", metavar="IMG",
                   help="BASE_IMAGE build arg: a CUDA PyTorch image for real use (default: the Dockerfile's), "
                        "anything with Python >= 3.10, torch and pip for local tests")
    b.add_argument("--tag", "-t", default="smdist-train:latest", help="image tag (default: %(default)s)")
    b.add_argument("--push", metavar="ECR_URI",
                   help="also tag the image as ECR_URI and push it (log in to ECR first); use it as image_uri")
    b.add_argument("--context", metavar="DIR", help="write the build context here (default: a temporary folder)")
    b.add_argument("--no-build", action="store_true", help="only prepare the context (needs --context)")
    b.add_argument("--quiet", "-q", action="store_true", help="docker build -q")
    return p


def run(args: argparse.Namespace) -> int:
    from ..backends.docker.image import EngineUnavailable, build_image, prepare_context, require_engine

    if args.no_build and not args.context:
        problem("--no-build: needs --context DIR (where the build context is written)")
        return EXIT_INVALID
    try:
        if not args.no_build:
            require_engine()  # before the wheel is built: say at once when there is nothing to build with
        with tempfile.TemporaryDirectory(prefix="smdist-image-") as tmp:
            context = prepare_context(Path(args.context) if args.context else Path(tmp))
            if args.no_build:
                sys.stdout.write(f"build context written to {context}\n")
                return EXIT_OK
            image = build_image(context, args.tag, args.base_image, push=args.push, quiet=args.quiet)
    except EngineUnavailable as exc:
        problem(str(exc))
        return EXIT_INVALID
    except FileNotFoundError as exc:
        problem(str(exc))
        return EXIT_INVALID
    except RuntimeError as exc:
        problem(str(exc))
        return EXIT_FAILED
    sys.stdout.write(f"built {image.tag}" + (f", pushed {image.pushed}" if image.pushed else "") + "\n")
    return EXIT_OK
