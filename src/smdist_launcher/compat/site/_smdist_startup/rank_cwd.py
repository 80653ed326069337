"""An MPI rank of smdist-train moves to its host's code dir."""
import os


def move_mpi_rank_to_code_dir() -> None:
    """mpirun starts every rank in its own cwd, i.e. the master's code dir: an MPI rank of smdist-train moves to its
    host's code dir (on SageMaker both are /opt/ml/code, so this changes nothing there)."""
    cwd = os.environ.get("SMDIST_RANK_CWD")
    if cwd and "OMPI_COMM_WORLD_RANK" in os.environ and os.path.isdir(cwd):
        try:
            os.chdir(cwd)
        except OSError:
            pass
