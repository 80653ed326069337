import os
import subprocess
import sys
from pathlib import Path

from smdist_launcher.container.commands import (
    SHELL_RANK_IN_CODE_DIR,
    TORCHRUN_AGENT_MODULE,
    host_option_indexes,
    is_mpirun,
    is_torchrun,
    mpirun_local,
    resolve_python,
    through_rank_entry,
    torchrun_with_tee,
)


def test_resolve_python_and_torchrun():
    assert resolve_python(["python", "t.py"]) == [sys.executable, "t.py"]
    argv = resolve_python(["torchrun", "--nnodes", "1", "t.py"])
    assert argv[:3] == [sys.executable, "-m", TORCHRUN_AGENT_MODULE] and is_torchrun(argv)
    plain = resolve_python(["python", "-m", "torch.distributed.run", "--nnodes", "2", "t.py"])
    assert plain == [sys.executable, "-m", TORCHRUN_AGENT_MODULE, "--nnodes", "2", "t.py"]
    assert torchrun_with_tee(argv)[3:5] == ["--tee", "3"]
    assert torchrun_with_tee(["torchrun", "--tee", "1", "t.py"]) == ["torchrun", "--tee", "1", "t.py"]
    assert resolve_python(["/bin/sh", "x.sh"]) == ["/bin/sh", "x.sh"]


def test_mpirun_local_adds_agent_once():
    argv = ["mpirun", "--host", "algo-1:2,algo-2:2", "-np", "4", "--tag-output", "-mca", "plm_rsh_no_tree_spawn",
            "1", "-x", "PATH", "-x", "PYTHONPATH", "python", "-m", "mpi4py", "t.py", "--name", "python"]
    out = mpirun_local(argv, agent=True)
    assert is_mpirun(out)
    assert out.count("--tag-output") == 1 and out.count("plm_rsh_no_tree_spawn") == 1
    i = out.index("plm_rsh_agent")
    assert out[i + 1] == f"{sys.executable} -m smdist_launcher.container.rsh_agent"
    # only the program's interpreter is replaced, not a user argument that happens to read "python"
    assert out[-6:] == [sys.executable, "-m", "mpi4py", "t.py", "--name", "python"]
    assert "PYTHONPATH" not in out and out.count("PATH") == 1  # each host's orted has its own PYTHONPATH
    assert "plm_rsh_agent" not in mpirun_local(argv, agent=False)
    assert "PYTHONPATH" in mpirun_local(argv, agent=False)
    assert host_option_indexes(argv) == {2}


def test_mpirun_local_leaves_a_shell_programs_arguments_alone():
    """A shell entry point has no interpreter token: a hyperparameter value "python" after /bin/sh is the script's."""
    argv = ["mpirun", "-np", "2", "-x", "PATH", "/bin/sh", "-c", 'exec "$0" "$@"', "./run.sh", "--lang", "python"]
    out = mpirun_local(argv, agent=True)
    assert out[out.index("/bin/sh"):] == ["/bin/sh", "-c", SHELL_RANK_IN_CODE_DIR, *argv[8:]]
    assert sys.executable not in out[out.index("/bin/sh"):]
    # a user's value that reads like the program is the script's
    python = ["mpirun", "-np", "2", "python", "t.py", "-b", "/bin/sh", "-c", 'exec "$0" "$@"']
    assert mpirun_local(python, agent=True)[-5:] == python[-5:]


def test_a_shell_rank_runs_its_own_hosts_copy_in_its_own_code_dir(tmp_path: Path) -> None:
    """mpirun starts every rank in the master's code dir: a shell rank of another host moves to its host's first
    (as a Python rank does), so `./run.sh` is that host's file and what it writes lands in that host's tree."""
    master, mine = tmp_path / "algo-1" / "code", tmp_path / "algo-2" / "code"
    for code in (master, mine):
        code.mkdir(parents=True)
        (code / "run.sh").write_text('#!/bin/sh\necho "$PWD" > here.txt\nprintf "%s|" "$@"\n')
        (code / "run.sh").chmod(0o755)
    argv = mpirun_local(["mpirun", "/bin/sh", "-c", 'exec "$0" "$@"', "./run.sh", "a b", "--x", "$(id)"], agent=True)
    program = argv[argv.index("/bin/sh"):]
    done = subprocess.run(program, cwd=master, env={**os.environ, "SMDIST_RANK_CWD": str(mine)},
                          capture_output=True, text=True, check=True)
    assert done.stdout == "a b|--x|$(id)|"
    assert (mine / "here.txt").read_text().strip() == str(mine) and not (master / "here.txt").exists()
    # no (or a missing) code dir of its own: it stays where mpirun started it, as before
    subprocess.run(program, cwd=master, env={**os.environ, "SMDIST_RANK_CWD": str(tmp_path / "gone")}, check=True)
    assert (master / "here.txt").read_text().strip() == str(master)


def test_every_python_rank_runs_through_the_rank_entry():
    py, entry = sys.executable, ["-m", "smdist_launcher.container.rank_entry"]
    assert through_rank_entry([py, "t.py", "--lr", "1"], "t.py") == [py, *entry, "t.py", "--lr", "1"]
    torchrun = [py, "-m", "torch.distributed.run", "--tee", "3", "--nnodes", "2", "t.py", "--x", "t.py"]
    assert through_rank_entry(torchrun, "t.py") == [*torchrun[:7], "--module", entry[1], "t.py", "--x", "t.py"]
    mpi = ["mpirun", "-np", "4", "-x", "PATH", "smddprun", py, "-m", "mpi4py", "t.py", "--name", "python"]
    assert through_rank_entry(mpi, "t.py") == [*mpi[:7], *entry, "-m", "mpi4py", "t.py", "--name", "python"]
    # left alone: not a Python script, torchrun told how to run it, an argv without the script, already wrapped
    for argv, ep in (([py, "t.sh"], "t.sh"), ([*torchrun[:3], "--no-python", "t.py"], "t.py"),
                     (["/bin/sh", "t.sh"], "t.py"), ([py, *entry, "t.py"], "t.py")):
        assert through_rank_entry(argv, ep) == argv
