"""container/rank_entry.py: a rank ends as `python SCRIPT` would (status, traceback, output, atexit), and skips only
the interpreter's teardown, and only while torch's gloo workers are alive (the exit abort, docs/exit-abort.md)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ENTRY = [sys.executable, "-m", "smdist_launcher.container.rank_entry"]

ENDINGS = {
    "returns": "print('out')",
    "exit-3": "import sys\nprint('out')\nsys.exit(3)",
    "exit-message": "raise SystemExit('a message')",
    "raises": "def f():\n    raise ValueError('broken')\nf()",
    "exit-none": "import sys\nsys.exit()",
}


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_status_output_and_traceback_as_python_gives_them(tmp_path, ending):
    script = tmp_path / "train.py"
    script.write_text("import atexit\natexit.register(print, 'atexit ran')\n" + ENDINGS[ending] + "\n")
    plain, ours = _run([sys.executable, "train.py"], tmp_path), _run([*ENTRY, "train.py"], tmp_path)
    assert (ours.returncode, ours.stdout, ours.stderr) == (plain.returncode, plain.stdout, plain.stderr)


def test_argv_path_and_main_as_python_sets_them(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "helper.py").write_text("VALUE = 7\n")
    (tmp_path / "sub" / "train.py").write_text(textwrap.dedent("""
        import os, sys, helper
        print(sys.argv, sys.path[0] == os.path.dirname(os.path.abspath(__file__)), __name__, helper.VALUE)
    """))
    ours = _run([*ENTRY, "sub/train.py", "--lr", "0.1"], tmp_path)
    assert ours.returncode == 0 and ours.stdout.strip() == "['sub/train.py', '--lr', '0.1'] True __main__ 7"


def test_annotations_are_the_scripts_own_not_the_runners(tmp_path):
    """rank_entry compiles with `from __future__ import annotations` in force: compile() passed it on to the script,
    whose annotations became strings (AWS's v3 params_script then failed in OmegaConf.structured with a NameError)."""
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import dataclasses, typing
        @dataclasses.dataclass
        class Config:
            lr: float = 0.1
        print([f.type for f in dataclasses.fields(Config)], typing.get_type_hints(Config))
    """))
    plain, ours = _run([sys.executable, "train.py"], tmp_path), _run([*ENTRY, "train.py"], tmp_path)
    assert plain.returncode == ours.returncode == 0
    assert ours.stdout == plain.stdout == "[<class 'float'>] {'lr': <class 'float'>}\n"


def test_an_atexit_handler_sees_the_exception_the_script_died_of(tmp_path):
    """The interpreter sets sys.last_value (3.12: sys.last_exc too) before printing an uncaught exception; atexit
    handlers use it to tell a death by an exception (smp/teardown.py skips joining peers' collectives then)."""
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import atexit, sys
        atexit.register(lambda: print(repr(sys.last_value), getattr(sys, "last_exc", sys.last_value) is sys.last_value))
        raise ValueError("broken")
    """))
    plain, ours = _run([sys.executable, "train.py"], tmp_path), _run([*ENTRY, "train.py"], tmp_path)
    assert (ours.returncode, ours.stdout) == (plain.returncode, plain.stdout) == (1, "ValueError('broken') True\n")


def test_missing_script_is_reported_as_python_does(tmp_path):
    ours = _run([*ENTRY, "missing.py"], tmp_path)
    assert ours.returncode == 2 and "can't open file" in ours.stderr and "missing.py" in ours.stderr


def test_a_module_runs_as_main(tmp_path):
    ours = _run([*ENTRY, "-m", "json.tool", "missing.json"], tmp_path)
    assert ours.returncode == 2 and "usage: python -m json.tool" in ours.stderr  # its own argparse ran


GLOO_SCRIPT = """
import atexit, sys
import torch, torch.distributed as dist

class Teardown:
    def __del__(self):
        print("teardown ran", flush=True)

kept = Teardown()  # a module global: freed only when the interpreter tears the module down
atexit.register(print, "atexit ran")
if sys.argv[1] == "gloo":
    dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
    t = torch.ones(4)
    dist.all_reduce(t)
log = open(sys.argv[3], "w")  # never closed: teardown would have flushed it
log.write("partial results")
print("trained", flush=True)
sys.exit(int(sys.argv[4]))
"""


@pytest.mark.parametrize("status", [0, 5])
def test_teardown_is_skipped_only_while_gloo_workers_live(tmp_path, status):
    (tmp_path / "train.py").write_text(GLOO_SCRIPT)
    results = {}
    for mode in ("gloo", "none"):
        out = tmp_path / f"{mode}.txt"
        p = _run([*ENTRY, "train.py", mode, str(tmp_path / f"{mode}.store"), str(out), str(status)], tmp_path)
        assert p.returncode == status, p.stderr
        assert p.stdout.startswith("trained\natexit ran\n") and out.read_text() == "partial results"
        results[mode] = "teardown ran" in p.stdout
    # with gloo workers alive the process ends before teardown (where a worker could take the GIL too late)
    assert results == {"gloo": False, "none": True}
