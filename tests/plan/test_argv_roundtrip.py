"""Hyperparameter values with shell metacharacters reach the script unchanged: the rendered argv goes through a real
process."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from hypothesis import given, settings, strategies as st

from smdist_launcher.jobspec.resolved import ResolvedJob
from smdist_launcher.plan.hyperparameters import to_cmd_args
from smdist_launcher.plan.planner import build_plan

NASTY = {
    "subshell": "$(rm -rf /)",
    "backticks": "`touch /tmp/pwned`",
    "chain": "a; echo hi && false || true | cat > /tmp/x",
    "quotes": "it's \"quoted\" 'twice'",
    "newlines": "line1\nline2\r\n\ttab",
    "glob": "*.py ~ ?[a-z]",
    "dollar": "$HOME ${PATH} $$ $1",
    "spaces": "  leading and trailing  ",
    "unicode": "héllo ✓ 𝔘",
    "dashes": "--not-a-flag",
    "empty": "",
}
ECHO = "import sys, json; print(json.dumps(sys.argv[1:]))"


def test_single_host_argv_survives_a_real_process(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(strategy="single", instance_count=1, hyperparameters=NASTY))
    argv = plan.hosts[0].argv
    assert argv[:2] == ["python", "train.py"]
    out = subprocess.run([sys.executable, "-c", ECHO, *argv[2:]], capture_output=True, text=True, check=True,
                         timeout=60)
    received = json.loads(out.stdout)
    assert received == argv[2:]
    assert dict(zip(received[0::2], received[1::2], strict=True)) == {f"--{k}": v for k, v in NASTY.items()}


def test_shell_entry_point_under_mpirun_gets_its_argv_unchanged(make_job: Callable[..., ResolvedJob],
                                                                 tmp_path: Path) -> None:
    """The rank's program (what mpirun starts) run by a real /bin/sh: no value is expanded, split or executed."""
    plan = build_plan(make_job(strategy="mpi", instance="local", processes_per_host=1, entry_point="run.sh",
                               hyperparameters=NASTY))
    argv = plan.hosts[0].argv
    program = argv[argv.index("/bin/sh"):]
    assert program[:4] == ["/bin/sh", "-c", 'exec "$0" "$@"', "./run.sh"]
    (tmp_path / "run.sh").write_text(f"#!{sys.executable}\n{ECHO}\n")  # the script's #! line picks its interpreter
    (tmp_path / "run.sh").chmod(0o755)
    out = subprocess.run(program, cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60)
    received = json.loads(out.stdout)
    assert received == program[4:]
    assert dict(zip(received[0::2], received[1::2], strict=True)) == {f"--{k}": v for k, v in NASTY.items()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]  # nothing ran: no file was created


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=2)
                       .filter(lambda k: not k.startswith("sagemaker_")),
                       st.text(alphabet=st.characters(blacklist_categories=("Cs",))), max_size=5))
def test_any_text_value_is_one_unchanged_token(hyperparameters: dict[str, str]) -> None:
    args = to_cmd_args(hyperparameters)
    assert args[1::2] == [hyperparameters[k] for k in sorted(hyperparameters)]
