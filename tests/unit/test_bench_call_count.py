"""The call counter of tests/benchmarks/bench_latency.py --count-calls: its hook in a real process, and the fit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import call_count  # noqa: E402

LOOP = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from clients.batch_fetcher import _take_answer
    from clients.batch_sender import _answer
    from runtime.worker_task import _send_batch
    while True:
        _take_answer()
        for _ in range(3):
            _send_batch()
        _answer()
        time.sleep(0.001)
""")


def fake_hot_path(root: Path) -> Path:
    """Modules named like mirrorline's hot path, each with the function call_count counts."""
    for package, module, function in (("clients", "batch_fetcher", "_take_answer"),
                                      ("clients", "batch_sender", "_answer"),
                                      ("runtime", "worker_task", "_send_batch")):
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").touch()
        (root / package / f"{module}.py").write_text(f"def {function}():\n    return len('x')\n")
    return root


def wait_ready(directory: Path, pid: int) -> None:
    deadline = time.monotonic() + 20
    while not (directory / f"{pid}.ready").exists():
        assert time.monotonic() < deadline, "the hook never said it was ready"
        time.sleep(0.05)


def test_a_counted_window_finds_every_marker_and_the_calls_around_them(tmp_path):
    code = fake_hot_path(tmp_path / "code")
    window = call_count.Window(tmp_path / "profiles")
    env = {**call_count.engine_env(window.directory), "PATH": "/usr/bin:/bin"}
    process = subprocess.Popen([sys.executable, "-c", LOOP, str(code)], env=env)
    try:
        wait_ready(window.directory, process.pid)
        window.start([process.pid])
        assert window.running
        time.sleep(0.5)
        window.stop()
        assert not window.running
        count = window.read()  # waits for the profile, which the process writes after SIGUSR2
        assert process.poll() is None, "a signal ended the process instead of reaching the hook"
    finally:
        process.kill()
        process.wait()
    assert count.missing == []
    assert count.fetches > 10 and abs(count.produces - count.fetches) <= 1  # the window may cut one loop
    assert abs(count.batches - 3 * count.fetches) <= 3  # the window may cut a loop at either end
    # each marker call also calls len(); the loop calls sleep
    assert count.calls >= 2 * (count.fetches + count.produces + count.batches)
    assert count.batches_per_fetch() == pytest.approx(3, abs=0.1)
    assert 0.3 < count.seconds < 5


def test_no_signal_goes_to_a_process_without_the_hook(tmp_path):
    window = call_count.Window(tmp_path / "profiles")
    window.directory.mkdir()
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(RuntimeError, match="no engine process loaded the call-count hook"):
            window.start([process.pid])
        time.sleep(0.2)
        assert process.poll() is None  # SIGUSR1's default action would have ended it
    finally:
        process.kill()
        process.wait()


def counts(batches_per_s: float, fetches_per_s: float, per_batch: float, per_trip: float) -> call_count.CallCount:
    return call_count.CallCount(seconds=40, calls=int(40 * (per_batch * batches_per_s + per_trip * fetches_per_s)),
                                fetches=int(40 * fetches_per_s), batches=int(40 * batches_per_s))


def test_two_trickle_waits_split_a_batchs_calls_from_a_round_trips():
    per_batch, per_trip = call_count.split_costs([counts(924, 167, 230, 450), counts(950, 267, 230, 450)])
    assert per_batch == pytest.approx(230, rel=0.01)
    assert per_trip == pytest.approx(450, rel=0.01)


def test_alike_windows_do_not_pretend_to_split_the_costs():
    assert call_count.split_costs([counts(924, 167, 230, 450)]) is None
    assert call_count.split_costs([counts(924, 167, 230, 450), counts(930, 170, 230, 450)]) is None
    assert call_count.split_costs([call_count.CallCount(seconds=40, calls=10), counts(924, 167, 230, 450)]) is None
