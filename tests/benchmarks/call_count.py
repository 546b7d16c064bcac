"""Counting a mirrorline engine's Python calls over a window of a benchmark run (``--count-calls``).

At 1 MB/s an engine's CPU moves by about 5 % between rounds on a shared machine, so a change that
saves a tenth of the work per forwarded batch does not show in CPU-seconds (docs/performance.md,
*Where the tail is*). The number of Python calls does not move with the load. Over a window of a
run this counts them, with the fetch answers, produce answers and forwarded batches they served,
so a change to the hot path can be judged by calls per batch and per round trip.

The engine runs with ``call_count_hook`` first on its PYTHONPATH and ``MIRRORLINE_BENCH_PROFILE_DIR``
set. The hook's ``sitecustomize`` starts cProfile on SIGUSR1 and stops it and writes
``<pid>.pstats`` on SIGUSR2. cProfile slows the engine while it counts, so a counted run's latency
and CPU are not comparable with an uncounted run's.

With two counted runs whose batches per fetch differ (e.g. ``mirrorline`` and ``mirrorline-trickle-5``
at the same rate), :func:`split_costs` solves for the calls a batch and a round trip cost.
"""

from __future__ import annotations

import os
import pstats
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

HOOK_DIR = Path(__file__).with_name("call_count_hook")
ENV_DIR = "MIRRORLINE_BENCH_PROFILE_DIR"

#: what is counted: name -> (the end of a function's file path, the function's name); one call each
MARKERS = {"fetches": ("clients/batch_fetcher.py", "_take_answer"),
           "produces": ("clients/batch_sender.py", "_answer"),
           "batches": ("runtime/worker_task.py", "_send_batch"),
           "records": ("runtime/worker_task.py", "_send")}


@dataclass
class CallCount:
    """The calls of one counted window, summed over the engine's processes."""

    seconds: float = 0.0
    calls: int = 0
    fetches: int = 0
    produces: int = 0
    batches: int = 0
    records: int = 0
    #: markers no profiled function matched: the hot path was renamed and MARKERS must follow it
    missing: list[str] = field(default_factory=list)

    def per_second(self, what: str) -> float:
        """``what`` (a field) per second of the window."""
        return getattr(self, what) / self.seconds if self.seconds else 0.0

    def calls_per_batch(self) -> float | None:
        """All calls over the forwarded batches: an upper bound of a batch's own cost."""
        return self.calls / self.batches if self.batches else None

    def batches_per_fetch(self) -> float | None:
        """Forwarded batches over fetch answers: how many a round trip carried."""
        return self.batches / self.fetches if self.fetches else None


def engine_env(directory: Path) -> dict[str, str]:
    """The environment variables that make an engine countable, its profiles landing in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = os.environ.get("PYTHONPATH")
    return {ENV_DIR: str(directory), "PYTHONPATH": str(HOOK_DIR) + (os.pathsep + path if path else "")}


class Window:
    """Starts and stops the count in every process of an engine that has the hook in place."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.pids: list[int] = []
        self.started_at: float | None = None
        self.seconds = 0.0

    def start(self, pids: list[int]) -> None:
        """Send SIGUSR1 to those of ``pids`` whose hook said it is ready; raise if none is."""
        self.pids = [pid for pid in pids if (self.directory / f"{pid}.ready").exists()]
        if not self.pids:
            raise RuntimeError(f"no engine process loaded the call-count hook ({HOOK_DIR}); is PYTHONPATH "
                               f"overridden in the engine's environment?")
        for pid in self.pids:
            os.kill(pid, signal.SIGUSR1)
        self.started_at = time.monotonic()

    @property
    def running(self) -> bool:
        """Started and not yet stopped."""
        return self.started_at is not None and not self.seconds

    def stop(self) -> None:
        """Send SIGUSR2: every process stops counting and writes its profile (:meth:`read` waits for them).
        It returns at once, so a benchmark's writer keeps its rate while the profiles are written."""
        assert self.started_at is not None
        for pid in self.pids:
            os.kill(pid, signal.SIGUSR2)
        self.seconds = time.monotonic() - self.started_at

    def read(self, timeout_s: float = 30.0) -> CallCount:
        """The window's counts (:func:`read_counts`), once every process has written its profile."""
        deadline = time.monotonic() + timeout_s
        while not all((self.directory / f"{pid}.pstats").exists() for pid in self.pids):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the engine wrote no profile within {timeout_s:g} s of SIGUSR2")
            time.sleep(0.1)
        return read_counts([self.directory / f"{pid}.pstats" for pid in self.pids], self.seconds)


def read_counts(paths: list[Path], seconds: float) -> CallCount:
    """Sum the calls in the profiles at ``paths``, and the calls of each of :data:`MARKERS`."""
    count = CallCount(seconds=seconds)
    seen = set()
    for path in paths:
        stats = pstats.Stats(str(path)).stats  # {(file, line, function): (primitive, total calls, ...)}
        for (filename, _line, function), entry in stats.items():
            count.calls += entry[1]
            for name, (suffix, marker) in MARKERS.items():
                if function == marker and filename.replace(os.sep, "/").endswith(suffix):
                    setattr(count, name, getattr(count, name) + entry[1])
                    seen.add(name)
    count.missing = [name for name in MARKERS if name not in seen and name != "records"]
    return count


def split_costs(counts: list[CallCount]) -> tuple[float, float] | None:
    """(calls per forwarded batch, calls per round trip) fitting ``calls = batch * batches + trip * fetches``
    over ``counts`` (least squares); None unless two of them differ in batches per fetch by 10 % or more."""
    usable = [c for c in counts if c.batches and c.fetches]
    ratios = [c.batches / c.fetches for c in usable]
    if len(usable) < 2 or max(ratios) < 1.1 * min(ratios):
        return None
    # normal equations of the two-unknown fit, per second so every window weighs the same
    bb = sum(c.per_second("batches") ** 2 for c in usable)
    ff = sum(c.per_second("fetches") ** 2 for c in usable)
    bf = sum(c.per_second("batches") * c.per_second("fetches") for c in usable)
    by = sum(c.per_second("batches") * c.per_second("calls") for c in usable)
    fy = sum(c.per_second("fetches") * c.per_second("calls") for c in usable)
    determinant = bb * ff - bf * bf
    if not determinant:
        return None
    return (by * ff - fy * bf) / determinant, (fy * bb - by * bf) / determinant
