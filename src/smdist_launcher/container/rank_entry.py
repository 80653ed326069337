"""``python -m smdist_launcher.container.rank_entry SCRIPT|-m MODULE [ARGS...]``: how smdist-train starts every Python
rank (under torchrun, mpirun/smddprun, or alone).

It runs the user's program as ``__main__``, exactly as ``python SCRIPT`` or ``python -m MODULE`` would (``sys.argv``,
``sys.path[0]``, tracebacks), and then ends the process the way the interpreter would, with the program's own exit
status. One step differs, and only in one case (docs/exit-abort.md has the core dump behind it):

If torch's gloo worker threads (``pt_gloo_runloop``) are still alive once the program has ended, every non-daemon
thread has been joined and every ``atexit`` handler has run, the process ends with ``os._exit(status)`` after flushing
all output, instead of tearing the interpreter down. A gloo worker may still be dropping the last reference to a
finished collective's tensors; that needs the GIL, and a thread that asks for the GIL while Python 3.11 finalizes is
ended with ``pthread_exit``, whose forced unwind meets a ``noexcept`` C++ frame: ``std::terminate``, SIGABRT, and a
job that did all its work is reported ``Failed``. Gloo has no way to stop its workers (pytorch/pytorch#130345).

Why this cannot hide a failure: the status is decided before the shortcut, the same way CPython decides it (0 when the
program returns, ``SystemExit``'s code, 1 for an uncaught exception after its traceback is printed); the shortcut
only skips the teardown of objects that nothing will use again. A rank that is killed never gets here.

Stdlib only: it runs before anything else in the rank, and must not import torch.
"""
from __future__ import annotations

import _io
import atexit
import builtins
import gc
import importlib.machinery
import os
import runpy
import sys
import threading
import types
from types import TracebackType

MODULE = "smdist_launcher.container.rank_entry"
GLOO_WORKER_THREAD = "pt_gloo_runloop"  # the name torch gives ProcessGroupGloo's worker threads
# "always": never skip the teardown (to compare with the plain interpreter, or if the shortcut ever gets in the way)
TEARDOWN_ENV = "SMDIST_EXIT_TEARDOWN"
FLUSH_FAILED_STATUS = 120  # what CPython exits with when flushing stdout/stderr at exit fails


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    sys.argv = args  # the program's argv from here on (run_program puts its own name first)
    if not args or (args[0] == "-m" and len(args) < 2):
        sys.stderr.write(f"usage: python -m {MODULE} SCRIPT|-m MODULE [ARGS...]\n")
        sys.exit(2)
    finish(run_program(args))


def run_program(args: list[str]) -> int:
    """Run the program as __main__; returns its exit status."""
    try:
        if args[0] == "-m":
            sys.argv = [args[1], *args[2:]]  # run_module(alter_sys=True) puts the module's file in argv[0]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            script = args[0]
            try:
                with open(script, "rb") as f:
                    source = f.read()
            except OSError as exc:  # what `python SCRIPT` says and exits with
                sys.stderr.write(f"{sys.orig_argv[0]}: can't open file {os.path.abspath(script)!r}: "
                                 f"[Errno {exc.errno}] {exc.strerror}\n")
                return 2
            run_script(script, source)
        return 0
    except SystemExit as exc:
        return exit_status(exc.code)
    except KeyboardInterrupt:
        raise  # CPython's own handling: the process ends by SIGINT, as the launcher expects
    except BaseException as exc:  # noqa: BLE001 - reported exactly as the interpreter would report it
        tb = _user_frames(exc.__traceback__)
        exc = exc.with_traceback(tb)
        # as the interpreter does before its hook: atexit handlers read these to tell a death by an exception
        # (smp/teardown.py then leaves peers' collectives alone rather than hang joining them)
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
        if sys.version_info >= (3, 12):
            sys.last_exc = exc
        sys.excepthook(type(exc), exc, tb)  # the hook prints the exception's own traceback
        return 1


def run_script(script: str, source: bytes) -> None:
    """Run a script as `python SCRIPT` does (Python 3.9+): argv[0] as given, __file__ and tracebacks absolute, the
    script's folder first on sys.path, and its module stays sys.modules['__main__'] for atexit handlers."""
    path = os.path.abspath(script)
    sys.argv = [script, *sys.argv[1:]]
    sys.path[0] = os.path.dirname(os.path.realpath(script))  # `python -m` put the cwd there
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __builtins__=builtins,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", path))
    sys.modules["__main__"] = main
    # dont_inherit: compile() would otherwise give the script this module's `from __future__ import annotations`
    # (string annotations: dataclasses/OmegaConf/pydantic resolving them failed where `python SCRIPT` works)
    exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)  # noqa: S102 - running it is the point


def exit_status(code: object) -> int:
    """SystemExit's code as CPython turns it into an exit status (Python/pythonrun.c, _Py_HandleSystemExit)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the user's first frame: runpy's and ours are not the script's."""
    ours = (run_program.__code__, run_script.__code__)
    while tb is not None and tb.tb_next is not None and (
            tb.tb_frame.f_code in ours or tb.tb_frame.f_globals.get("__name__") == "runpy"):
        tb = tb.tb_next
    return tb


def finish(status: int) -> None:
    """End the process as Py_FinalizeEx would: join non-daemon threads, run atexit handlers, then exit with
    `status`; skip the interpreter's teardown only while gloo workers are alive (module docstring)."""
    threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx does first; later calls are no-ops
    atexit._run_exitfuncs()  # runs each handler once: the interpreter finds none left afterwards
    if os.environ.get(TEARDOWN_ENV) == "always" or not gloo_workers_alive():
        sys.exit(status)  # the ordinary teardown: nothing left that could take the GIL too late
    _end_mpi(status)
    if not flush_all_output() and status == 0:
        status = FLUSH_FAILED_STATUS
    os._exit(status & 0xFF)


def _end_mpi(status: int) -> None:
    """mpi4py ends MPI in a C-level exit hook (Py_AtExit) that os._exit would skip, and Open MPI counts a rank that
    initialized MPI and never finalized as a failed rank. Do what that hook does under `python -m mpi4py`:
    MPI_Abort with a non-zero status (mpi4py's abort status: it stops the other ranks instead of leaving them
    waiting in MPI_Finalize), MPI_Finalize otherwise."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return
    try:
        if not mpi.Is_initialized() or mpi.Is_finalized():
            return
        if status:
            mpi.COMM_WORLD.Abort(status)
        else:
            mpi.Finalize()
    except Exception as exc:  # noqa: BLE001 - the status stands; say why MPI could not be ended cleanly
        sys.stderr.write(f"smdist rank_entry: ending MPI failed: {exc}\n")


def gloo_workers_alive() -> bool:
    """Is any thread of this process one of torch's gloo workers? (/proc; elsewhere: no)."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm", encoding="utf-8", errors="replace") as f:
                if f.read().strip() == GLOO_WORKER_THREAD:
                    return True
        except OSError:  # the thread ended meanwhile
            continue
    return False


def flush_all_output() -> bool:
    """What teardown would have written: Python's open files and streams, then C stdio. False if stdout/stderr
    could not be flushed (CPython's exit status 120)."""
    ok = True
    for obj in gc.get_objects():
        # type(), not isinstance(): isinstance may read obj.__class__, and some module-level objects warn on that
        if issubclass(type(obj), _io._IOBase) and obj is not sys.stdout and obj is not sys.stderr:
            try:
                if not obj.closed and obj.writable():
                    obj.flush()
            except Exception:  # noqa: BLE001 - a file that cannot be flushed now could not be at teardown either
                pass
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001
            ok = False
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)  # printf-style output of C extensions
    except Exception:  # noqa: BLE001 - no libc to ask: nothing buffered there either
        pass
    return ok


if __name__ == "__main__":
    main()
