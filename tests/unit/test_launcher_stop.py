"""ProcessLauncher's way out: a stop asked for while workers start is not left waiting for the
starts, and workers stop side by side, one failing to stop not keeping the others running.

The herders are stand-ins (their start and stop are what is under test here); the real herders'
stop with both clusters down is tests/faults/test_stop_with_clusters_down.py.
"""

from __future__ import annotations

import asyncio
import time

from mirrorline.api.launcher import WorkerSpec
from mirrorline.boot.launcher import ProcessLauncher


class StandInHerder:
    """Records its stop; ``stop_s`` long, or raising ``stop_error``."""

    def __init__(self, worker_id: str, stop_s: float = 0.0, stop_error: Exception | None = None):
        self.worker_id = worker_id
        self.stop_s = stop_s
        self.stop_error = stop_error
        self.stopped = False

    async def stop(self) -> None:
        await asyncio.sleep(self.stop_s)
        self.stopped = True
        if self.stop_error is not None:
            raise self.stop_error


def launcher_with(herders: dict[str, StandInHerder], hanging: set[str] = frozenset()) -> ProcessLauncher:
    """A launcher whose workers are ``herders``; the start of those in ``hanging`` never ends (as a
    start against an unreachable cluster retries)."""
    launcher = ProcessLauncher(plugins=None)

    async def start(spec: WorkerSpec) -> StandInHerder:
        herder = herders[spec.worker_id]
        launcher.herders.append(herder)  # as the real ones: registered as the start begins
        if spec.worker_id in hanging:
            await asyncio.Event().wait()
        return herder

    launcher._start = start
    return launcher


async def test_a_stop_asked_for_during_a_start_stops_what_began_at_once():
    herders = {"A->B": StandInHerder("A->B"), "B->A": StandInHerder("B->A")}
    launcher = launcher_with(herders, hanging={"B->A"})
    running = asyncio.ensure_future(launcher.run([WorkerSpec("A->B", {}), WorkerSpec("B->A", {})]))
    while len(launcher.herders) < 2:
        await asyncio.sleep(0.01)
    launcher.stop_event.set()
    await asyncio.wait_for(running, 2)
    assert herders["A->B"].stopped and herders["B->A"].stopped


async def test_workers_stop_side_by_side_and_one_failing_does_not_keep_the_others_running(caplog):
    herders = {"one": StandInHerder("one", stop_s=0.5), "two": StandInHerder("two", stop_s=0.5),
               "three": StandInHerder("three", stop_error=RuntimeError("status topic unreachable"))}
    launcher = launcher_with(herders)
    launcher.stop_event.set()  # stop as soon as all have started
    began = time.monotonic()
    await asyncio.wait_for(launcher.run([WorkerSpec(name, {}) for name in herders]), 5)
    assert time.monotonic() - began < 0.9  # side by side: not 0.5 + 0.5
    assert all(herder.stopped for herder in herders.values())
    assert "Worker three did not stop cleanly: RuntimeError('status topic unreachable')" in caplog.text
