"""Minimal MPI script (run as `python -m mpi4py train.py`): an MPI allreduce of the ranks."""
from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank())
if comm.Get_rank() == 0:
    print(f"{comm.Get_size()} ranks, sum of ranks {total}")
