"""A rank of a job dumps its Python threads' stacks when the launcher asks (SIGUSR2)."""
import os

_stack_file = None  # kept open (and referenced) for the life of the process: faulthandler writes into it


def register_stack_dumps() -> None:
    """A rank of a job dumps every Python thread's stack when the launcher sends it SIGUSR2 (before it
    stops a hung job: max_run, Ctrl-C), into $SMDIST_STACKS_DIR/<pid>.txt. faulthandler writes from its C signal
    handler, so a rank stuck in a collective or in C code still answers. Only processes that know their rank register:
    torchrun's agent and other helpers are left alone."""
    global _stack_file
    folder = os.environ.get("SMDIST_STACKS_DIR")
    rank = (os.environ.get("RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("SMDIST_RANK"))
    if not folder or rank is None:
        return
    try:
        import faulthandler
        import json
        import signal

        os.makedirs(folder, exist_ok=True)
        final = os.path.join(folder, f"{os.getpid()}.txt")
        out = open(final + ".tmp", "w")  # noqa: SIM115 - kept open for the life of the process
        out.write(json.dumps({"pid": os.getpid(), "rank": int(rank), "host": os.environ.get("SMDIST_HOST")}) + "\n")
        out.flush()
        faulthandler.register(signal.SIGUSR2, file=out, all_threads=True, chain=False)
        os.replace(final + ".tmp", final)  # visible only once the handler is in place: the signal never kills it
        _stack_file = out
    except Exception:  # noqa: BLE001 - a diagnostic aid must never stop the user's script
        return
