"""Runs at interpreter start-up for user processes of smdist-train (this directory is on their PYTHONPATH).

Python imports this module by name; each job lives in ``_smdist_startup``: an MPI rank moves to its host's code dir,
a rank registers its stack dumps, SageMaker's import paths (``torch.sagemaker``, ``smdistributed.*``) are installed,
then the sitecustomize this one shadows runs."""
import os as _os

from _smdist_startup.chain import run_next_sitecustomize as _run_next_sitecustomize
from _smdist_startup.import_paths import install_import_paths as _install_import_paths
from _smdist_startup.rank_cwd import move_mpi_rank_to_code_dir as _move_mpi_rank_to_code_dir
from _smdist_startup.stack_dumps import register_stack_dumps as _register_stack_dumps

_move_mpi_rank_to_code_dir()
_register_stack_dumps()
_install_import_paths()
_run_next_sitecustomize(_os.path.dirname(_os.path.realpath(__file__)))
