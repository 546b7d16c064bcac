"""mirrorline processes give the C heap's free pages back after a burst (see mirrorline.boot.heap_trim)."""

from __future__ import annotations

import threading
import time

import pytest

from mirrorline.api.errors import ConfigError
from mirrorline.boot import heap_trim


def test_the_interval_comes_from_the_environment():
    assert heap_trim.interval_from({}) == heap_trim.INTERVAL_MS / 1000
    assert heap_trim.interval_from({"MIRRORLINE_HEAP_TRIM_INTERVAL_MS": " 500 "}) == 0.5
    assert heap_trim.interval_from({"MIRRORLINE_HEAP_TRIM_INTERVAL_MS": "0"}) == 0
    for value in ("soon", "-1", "1.5"):
        with pytest.raises(ConfigError, match="MIRRORLINE_HEAP_TRIM_INTERVAL_MS"):
            heap_trim.interval_from({"MIRRORLINE_HEAP_TRIM_INTERVAL_MS": value})


class _Info:
    def __init__(self, free: int):
        self.fordblks = free


class FakeLibc:
    """mallinfo2/malloc_trim as glibc answers them, with the free bytes set by the test."""

    def __init__(self, free: int):
        self.free = free
        self.trimmed = 0
        self.left_after_trim = 0

    def mallinfo2(self):
        return _Info(self.free)

    def malloc_trim(self, pad: int) -> int:
        assert pad == 0
        self.trimmed += 1
        self.free = self.left_after_trim
        return 1


def test_it_trims_only_when_much_of_the_heap_became_free():
    libc = FakeLibc(free=heap_trim.THRESHOLD_BYTES)
    trimmer = heap_trim.HeapTrimmer(1.0, libc)
    assert trimmer.check_once() is False and libc.trimmed == 0
    libc.free = heap_trim.THRESHOLD_BYTES + 1
    assert trimmer.check_once() is True and libc.trimmed == 1 and trimmer.trims == 1


def test_fragments_a_trim_cannot_give_back_do_not_make_it_trim_again():
    libc = FakeLibc(free=40 << 20)
    libc.left_after_trim = 30 << 20  # free chunks smaller than a page stay
    trimmer = heap_trim.HeapTrimmer(1.0, libc)
    assert trimmer.check_once() is True and libc.free == 30 << 20
    for _ in range(3):
        assert trimmer.check_once() is False  # still 30 MiB free, none of it to give back
    libc.free = (30 << 20) + heap_trim.THRESHOLD_BYTES + 1  # a new burst freed more
    assert trimmer.check_once() is True and libc.trimmed == 2


def test_a_busy_process_is_not_trimmed_until_it_is_quiet():
    libc = FakeLibc(free=200 << 20)
    trimmer = heap_trim.HeapTrimmer(1.0, libc)
    busy = heap_trim.QUIET_CPU_FRACTION
    assert trimmer.check_once(cpu_fraction=busy) is False  # mid-burst: the trim would stall allocations
    assert trimmer.check_once(cpu_fraction=1.7) is False  # several threads busy
    assert libc.trimmed == 0 and trimmer.skipped_busy == 2
    assert trimmer.check_once(cpu_fraction=busy / 2) is True and libc.trimmed == 1


class _CpuClock:
    """The process's CPU seconds as the test sets them: a whole core while ``busy``, none after."""

    def __init__(self):
        self.busy = True
        self._cpu = 0.0
        self._last = time.monotonic()

    def __call__(self) -> float:
        now = time.monotonic()
        if self.busy:
            self._cpu += now - self._last
        self._last = now
        return self._cpu


def _wait_for(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        threading.Event().wait(0.01)


def test_the_thread_measures_the_process_cpu_and_waits_for_quiet():
    libc = FakeLibc(free=64 << 20)
    clock = _CpuClock()
    trimmer = heap_trim.HeapTrimmer(0.02, libc, cpu_clock=clock)
    trimmer.start()
    try:
        _wait_for(lambda: trimmer.skipped_busy >= 5)  # a whole core busy, look after look
        assert libc.trimmed == 0 and trimmer.skipped_busy >= 5
        clock.busy = False
        _wait_for(lambda: libc.trimmed > 0)
        assert libc.trimmed == 1
    finally:
        trimmer.stop()


def test_the_thread_runs_while_the_block_runs_and_is_gone_after(monkeypatch):
    libc = FakeLibc(free=64 << 20)
    monkeypatch.setattr(heap_trim, "load_libc", lambda: libc)
    with heap_trim.trimming({"MIRRORLINE_HEAP_TRIM_INTERVAL_MS": "10"}) as trimmer:
        assert trimmer is not None
        deadline = threading.Event()
        for _ in range(200):
            if libc.trimmed:
                break
            deadline.wait(0.01)
        assert libc.trimmed == 1
    assert not any(thread.name == "mirrorline-heap-trim" for thread in threading.enumerate())
    with heap_trim.trimming({"MIRRORLINE_HEAP_TRIM_INTERVAL_MS": "0"}) as trimmer:
        assert trimmer is None


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_fragmented_heap_shrinks_with_real_glibc():
    libc = heap_trim.load_libc()
    if libc is None:
        pytest.skip("this C library has no mallinfo2/malloc_trim")
    # 64 KiB blocks come from the heap (below glibc's 128 KiB mmap threshold); freeing every other
    # one leaves free chunks between live blocks, which glibc does not return by itself
    blocks = [bytes(64 * 1024 - 64) for _ in range(3000)]
    for index in range(0, len(blocks), 2):
        blocks[index] = None
    before = _rss_bytes()
    trimmer = heap_trim.HeapTrimmer(1.0, libc, threshold_bytes=1 << 20)
    assert trimmer.check_once() is True
    released = before - _rss_bytes()
    assert released > 40 << 20, f"only {released >> 20} MiB went back"
    del blocks
