"""Giving the C heap's free pages back to the system after a burst (glibc only).

Record data lives in ``bytes`` objects that CPython allocates with ``malloc``. After a burst (an
initial copy of thousands of partitions, a catch-up) most of that memory is free again, but glibc
returns only the top of its heap to the system: the free chunks between blocks still in use stay
in the process, so its RSS stays at the burst's height, and what the process allocates next
(small objects in CPython's own arenas, which are not taken from that free space) comes on top.
Measured on the scale benchmark (docs/performance.md): after the 8,000-partition copy the heap
held over 100 MiB free while under 40 MiB were in use.

:class:`HeapTrimmer` is a daemon thread that, every ``interval``, asks glibc how much of its heap
is free (``mallinfo2``) and, when that grew by more than :data:`THRESHOLD_BYTES` since the last
trim left it, calls ``malloc_trim(0)``, which hands every whole free page back
(``madvise(MADV_DONTNEED)``); the pages come back from the kernel when used again. It never runs
on the event loop, but it trims only while the process is quiet (under :data:`QUIET_CPU_FRACTION`
of a core over the last interval): ``malloc_trim`` holds glibc's arena locks while it walks the
heap (27, 93 and 439 ms measured here on heaps of 20,000, 60,000 and 150,000 fragmented
blocks), and every allocation in the process waits for it. A busy process reuses its free memory
anyway, and the trim it skips comes once the burst is over, which is when trimming gives back
what stays given back. On a C library without ``mallinfo2`` (musl, glibc before 2.33) it does
nothing and says so at DEBUG. ``MIRRORLINE_HEAP_TRIM_INTERVAL_MS`` sets the interval (default
:data:`INTERVAL_MS`); ``0`` turns it off; anything else but a whole number stops the command with
a one-line error.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping

from mirrorline.api.errors import ConfigError

#: How often the heap is looked at, in milliseconds
INTERVAL_MS = 2000
#: Bytes that must have become free since the last trim before the heap is trimmed again
THRESHOLD_BYTES = 16 * 1024 * 1024
#: The process counts as quiet, and may be trimmed, below this share of one core over the last interval
QUIET_CPU_FRACTION = 0.05
ENVIRONMENT_VARIABLE = "MIRRORLINE_HEAP_TRIM_INTERVAL_MS"

log = logging.getLogger(__name__)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def interval_from(environ: Mapping[str, str]) -> float:
    """Seconds between looks at the heap asked for in ``environ`` (0: off); a malformed value is a ConfigError."""
    value = environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if not value:
        return INTERVAL_MS / 1000
    try:
        milliseconds = int(value)
    except ValueError:
        milliseconds = -1
    if milliseconds < 0:
        raise ConfigError(f"{ENVIRONMENT_VARIABLE}={value!r} is not a whole number of milliseconds (0 turns "
                          f"heap trimming off); unset it for mirrorline's {INTERVAL_MS}")
    return milliseconds / 1000


def load_libc():
    """glibc with ``mallinfo2`` and ``malloc_trim`` typed for ctypes, or None where they are missing."""
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, libc's among them (find_library runs ldconfig)
        libc.mallinfo2.restype = _MallInfo2
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


class HeapTrimmer:
    """A daemon thread trimming the C heap when much of it is free (module docstring)."""

    def __init__(self, interval_s: float, libc, threshold_bytes: int = THRESHOLD_BYTES,
                 cpu_clock: Callable[[], float] = time.process_time):
        self.interval_s = interval_s
        #: the process's CPU seconds so far (every thread's)
        self._cpu_clock = cpu_clock
        self.threshold_bytes = threshold_bytes
        #: how many times the heap was trimmed
        self.trims = 0
        #: how many looks left the heap alone because the process was busy
        self.skipped_busy = 0
        self._libc = libc
        #: free bytes the last trim left (fragments it cannot give back)
        self._left_free = 0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def check_once(self, cpu_fraction: float = 0.0) -> bool:
        """Trim if the process is quiet (``cpu_fraction``, its share of one core since the last
        look, under :data:`QUIET_CPU_FRACTION`) and the free bytes grew by more than the threshold
        since the last trim; returns whether it trimmed.

        What a trim cannot give back (free chunks smaller than a page, between live blocks) stays
        counted as free: measured from what was left after the last trim, an idle process with
        such fragments is not trimmed again and again for nothing."""
        if cpu_fraction >= QUIET_CPU_FRACTION:
            self.skipped_busy += 1
            return False
        free = self._libc.mallinfo2().fordblks
        if free - self._left_free <= self.threshold_bytes:
            self._left_free = min(self._left_free, free)
            return False
        started = time.monotonic()
        self._libc.malloc_trim(0)
        took = time.monotonic() - started
        self.trims += 1
        self._left_free = self._libc.mallinfo2().fordblks
        log.info("Gave the system back free heap memory: %.0f MiB were free, %.0f MiB stay free between blocks in "
                 "use (malloc_trim took %.0f ms, process quiet at %.1f %% of a core)", free / 2**20,
                 self._left_free / 2**20, took * 1000, cpu_fraction * 100)
        return True

    def start(self) -> None:
        """Start looking at the heap every ``interval_s`` (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mirrorline-heap-trim", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (a trim under way finishes first)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        cpu, at = self._cpu_clock(), time.monotonic()
        while not self._stopping.wait(self.interval_s):
            try:
                last_cpu, last_at = cpu, at
                cpu, at = self._cpu_clock(), time.monotonic()
                self.check_once((cpu - last_cpu) / max(at - last_at, 1e-3))
            except Exception:  # noqa: BLE001 - a failing C call must not end the thread unseen
                log.exception("Heap trimming failed and is off for this process; set %s=0 to silence this",
                              ENVIRONMENT_VARIABLE)
                return


@contextlib.contextmanager
def trimming(environ: Mapping[str, str] | None = None) -> Iterator[HeapTrimmer | None]:
    """Trim the heap in the background for the duration of the block (None when off or unavailable)."""
    interval = interval_from(os.environ if environ is None else environ)
    libc = load_libc() if interval > 0 else None
    if libc is None:
        if interval > 0:
            log.debug("heap trimming is off: this C library has no mallinfo2/malloc_trim")
        yield None
        return
    trimmer = HeapTrimmer(interval, libc)
    trimmer.start()
    try:
        yield trimmer
    finally:
        trimmer.stop()
