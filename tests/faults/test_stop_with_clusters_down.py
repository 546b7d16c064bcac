"""A ``mirrorline mm2`` process told to stop (SIGTERM) while both its clusters are unreachable.

Each wait of the stop is bounded (the tasks' flush and offsets, the status records, the internal
topics' writes), so the process exits well inside a Kubernetes grace period instead of waiting out
the producers' two-minute delivery timeout once per flow, as it did (62 s with one flow, and a
crash on the way out: aiokafka's consumer close raised a CancelledError). It exits 0, says what it
could not store, and leaves no client unclosed.

Runs on the fault scenarios' own clusters (FA/FB): both brokers are killed, and restarted after.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.faults import kill_broker
from support.kafka import create_topic, produce, read_all
from support.mm2 import isolated_state, start_mm2

pytestmark = pytest.mark.integration

#: task.shutdown.graceful.timeout.ms (5 s) bounds each wait; at most four follow one another (a
#: change under way, flush and offsets, status records; the stores then close side by side without
#: waiting again): 5-11 s measured, 20 s before 2026-11-30's side-by-side stores, plus a loaded machine.
STOP_BOUND_S = 30.0


async def test_sigterm_with_both_clusters_down_exits_cleanly_in_bounded_time(broken_clusters, unique_name,
                                                                              tmp_path):
    source, target = broken_clusters.source, broken_clusters.target
    state = unique_name("down")
    topic = f"{state}-orders"
    await create_topic(source.bootstrap_servers, topic, 2)
    properties = tmp_path / "mm2.properties"
    properties.write_text(f"""clusters = A, B
A.bootstrap.servers = {source.bootstrap_servers}
B.bootstrap.servers = {target.bootstrap_servers}
A->B.enabled = true
A->B.topics = {topic}
{SINGLE_BROKER_MM2_PROPERTIES}{isolated_state(state)}""")
    log_path = tmp_path / "mm2.log"
    proc = start_mm2(properties, log_path)
    try:
        await produce(source.bootstrap_servers, topic, [(i % 2, None, f"r{i}".encode(), [], None) for i in range(50)])
        # librdkafka reads the copies: the flow runs, with a task writing to B
        await read_all(target.bootstrap_servers, f"A.{topic}", expect=50, timeout=90)
        # and both workers have started: a start the kill interrupts fails instead (one error line, exit 1)
        deadline = time.monotonic() + 90
        while "Running 2 worker(s)" not in log_path.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            await asyncio.sleep(0.1)
        await asyncio.to_thread(kill_broker, broken_clusters.source_cluster)
        await asyncio.to_thread(kill_broker, broken_clusters.target_cluster)
        await asyncio.sleep(2)  # the clients notice: connections refused, writes pile up
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.to_thread(proc.wait, 120)
        took = time.monotonic() - began
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = log_path.read_text()
    stop = log[log.index("Shutting down"):]
    assert rc == 0, stop[-4000:]
    assert took < STOP_BOUND_S, f"the stop took {took:.1f}s:\n{stop[-4000:]}"
    # it says what it could not do ...
    assert "could not record in the status topic" in stop, stop[-4000:]
    # ... and, having waited for its status writes in vain, does not wait for them again
    assert "were not acknowledged within 0s of stopping" in stop, stop[-4000:]
    # ... and goes down cleanly: no crash, no client left open, no failure nobody looked at
    for sign in ("Traceback", "Unclosed AIOKafka", "never retrieved", "did not stop cleanly: "):
        assert sign not in stop, f"{sign!r} in the log of the stop:\n{stop[-4000:]}"
