"""Loaded by every Python process started with this directory on PYTHONPATH (see ../call_count.py).

It does nothing unless ``MIRRORLINE_BENCH_PROFILE_DIR`` names a directory. Then SIGUSR1 starts
cProfile in the main thread (where a mirrorline process runs its event loop), SIGUSR2 stops it and
writes ``<dir>/<pid>.pstats``, and ``<dir>/<pid>.ready`` says the handlers are in place, so the
benchmark never sends a signal whose default action would end the process.
"""

import os

_directory = os.environ.get("MIRRORLINE_BENCH_PROFILE_DIR")
if _directory:
    import cProfile
    import signal

    _profile = cProfile.Profile()

    def _start(_signum, _frame):
        _profile.enable()

    def _stop(_signum, _frame):
        _profile.disable()
        path = os.path.join(_directory, f"{os.getpid()}.pstats")
        _profile.dump_stats(path + ".part")
        os.replace(path + ".part", path)  # the benchmark reads only whole files

    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    with open(os.path.join(_directory, f"{os.getpid()}.ready"), "w"):
        pass
