"""`smdist-train` / `python -m smdist_launcher.container`: run this host's part of a launch plan."""
from __future__ import annotations

import argparse
import sys

from ..contract.layout import resolve_root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="smdist-train", description=__doc__)
    parser.add_argument("--root", help="the /opt/ml root (default: $SMDIST_ML_ROOT, else /opt/ml)")
    parser.add_argument("--plan",
                        help="launch plan JSON (default: $SMDIST_PLAN, else <root>/input/config/launchplan.json)")
    parser.add_argument("--host", help="this host's name (default: current_host of resourceconfig.json)")
    parser.add_argument("--no-install", action="store_true", help="skip pip install -r requirements.txt")
    args = parser.parse_args(argv)
    from .runtime import main_run  # after argument parsing: --help stays instant

    return main_run(str(resolve_root(args.root)), args.plan, args.host, not args.no_install)


if __name__ == "__main__":
    sys.exit(main())
