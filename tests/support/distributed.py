"""A cluster of ``mirrorline distributed`` worker processes for tests, and checks of its history.

Workers are real processes (so a test can SIGKILL one), each with its own REST port, all in
one group with their own three internal topics on the given Kafka cluster. Their stderr goes
to a log file per worker, shown when a test fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from support.worker import Rest


#: Ports above the kernel's ephemeral range (32768-60999 by default): a port picked here and bound
#: by a worker seconds later cannot meanwhile be handed by the kernel to someone's bind(0) or
#: outgoing connection (it once went to a Spark test's py4j gateway, and the test's REST calls with it).
_ABOVE_EPHEMERAL = range(61000, 65536)
#: Ports this process handed out: a worker binds its port only once its process is up, so a port
#: free right now may be one handed out a moment ago (CI: two workers of one cluster got the same).
_HANDED_OUT: set[int] = set()


def _own_share(ports: range) -> list[int]:
    """The ports of ``ports`` this pytest process picks from: each xdist process its own residue
    class, so two processes never hand out the same port either."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    return [port for port in ports if port % count == index % count]


def free_port() -> int:
    """A TCP port free on loopback right now, outside the kernel's ephemeral range, and not handed
    out before by this process."""
    candidates = [port for port in _own_share(_ABOVE_EPHEMERAL) if port not in _HANDED_OUT]
    for port in random.sample(candidates, min(200, len(candidates))):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError("no free port found above the ephemeral range")


@dataclass
class WorkerProcess:
    """One worker: its process, REST URL, id (``host:port``) and log file."""

    index: int
    properties: Path
    log: Path
    port: int
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The worker's REST base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def worker_id(self) -> str:
        """The id the worker writes in statuses."""
        return f"127.0.0.1:{self.port}"


@dataclass
class WorkerCluster:
    """Starts, stops and kills the worker processes of one group."""

    bootstrap: str
    name: str
    directory: Path
    settings: dict[str, str] = field(default_factory=dict)
    workers: list[WorkerProcess] = field(default_factory=list)
    #: Extra environment of the worker processes (e.g. ``KAFKA_OPTS`` naming a JAAS file).
    env: dict[str, str] = field(default_factory=dict)

    @property
    def status_topic(self) -> str:
        """The group's status topic."""
        return f"{self.name}-status"

    def add_worker(self) -> WorkerProcess:
        """Write a new worker's properties and start it."""
        index = len(self.workers)
        port = free_port()
        props = {
            "bootstrap.servers": self.bootstrap, "listeners": f"http://127.0.0.1:{port}",
            "group.id": self.name, "config.storage.topic": f"{self.name}-configs",
            "offset.storage.topic": f"{self.name}-offsets", "status.storage.topic": self.status_topic,
            "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1", "offset.storage.partitions": "5",
            "status.storage.partitions": "3", "offset.flush.interval.ms": "1000",
            "session.timeout.ms": "6000", "heartbeat.interval.ms": "1000", **self.settings}
        path = self.directory / f"worker-{index}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        worker = WorkerProcess(index, path, self.directory / f"worker-{index}.log", port)
        self.workers.append(worker)
        self.start(worker)
        return worker

    def start(self, worker: WorkerProcess) -> None:
        """(Re)start a worker's process with its properties."""
        handle = open(worker.log, "a")
        worker.proc = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "distributed",
                                        str(worker.properties)], stdout=handle, stderr=subprocess.STDOUT,
                                       env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env})
        handle.close()

    def stop(self, worker: WorkerProcess, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        """Signal a worker and wait for it to exit; returns its exit code."""
        proc, worker.proc = worker.proc, None
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        proc.send_signal(sig)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def running(self) -> list[WorkerProcess]:
        """Workers whose process is alive."""
        return [w for w in self.workers if w.proc is not None and w.proc.poll() is None]

    def close(self) -> None:
        """Stop every worker (SIGTERM, then SIGKILL after a while)."""
        for worker in self.workers:
            if worker.proc is not None and worker.proc.poll() is None:
                worker.proc.send_signal(signal.SIGTERM)
        for worker in self.workers:
            self.stop(worker)

    async def wait_healthy(self, timeout: float = 60.0) -> None:
        """Wait until every live worker answers ``GET /health`` with 200 (joined, holds an assignment)."""
        for worker in self.running():
            async with Rest(worker.url) as rest:
                deadline = time.monotonic() + timeout
                while True:
                    assert worker.proc is not None and worker.proc.poll() is None, \
                        f"worker {worker.worker_id} exited\n{self.logs()}"
                    try:
                        if (await rest.call("GET", "/health"))[0] == 200:
                            break
                    except OSError:
                        pass
                    assert time.monotonic() < deadline, \
                        f"worker {worker.worker_id} never became healthy\n{self.logs()}"
                    await asyncio.sleep(0.25)

    def logs(self) -> str:
        """The tail of every worker's log, for failure messages."""
        parts = []
        for worker in self.workers:
            text = worker.log.read_text(errors="replace") if worker.log.exists() else ""
            parts.append(f"--- worker {worker.index} ({worker.worker_id}) ---\n" + "\n".join(text.splitlines()[-40:]))
        return "\n".join(parts)


def tasks_per_worker(status: dict) -> Counter:
    """``worker_id -> number of RUNNING tasks`` from a connector status."""
    return Counter(t["worker_id"] for t in status["tasks"] if t["state"] == "RUNNING")


async def wait_for_status(rest: Rest, connector: str, predicate, timeout: float = 60.0) -> dict:
    """Poll a connector's status until ``predicate(status)``; returns it."""
    return await rest.wait_for(f"/connectors/{connector}/status", predicate, timeout=timeout, interval=0.25)


@dataclass(frozen=True)
class StatusEvent:
    """One task status record read back from the status topic."""

    timestamp_ms: int
    task: str
    worker_id: str
    state: str
    generation: int


async def status_history(bootstrap: str, topic: str, connector: str) -> list[StatusEvent]:
    """Every task status record of ``connector`` in the status topic, in write-time order."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    events: list[StatusEvent] = []
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or []]
        if not partitions:
            await consumer._client.force_metadata_update()
            partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or []]
        if not partitions:  # no status written yet
            return []
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        prefix = f"status-task-{connector}-"
        async def behind() -> bool:
            return any([await consumer.position(tp) < end for tp, end in ends.items()])

        while await behind():
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                for record in records:
                    key = record.key.decode() if record.key else ""
                    if key.startswith(prefix) and record.value is not None:
                        value = json.loads(record.value)
                        events.append(StatusEvent(record.timestamp, key[len(prefix):], value["worker_id"],
                                                  value["state"], int(value.get("generation", 0))))
    finally:
        await consumer.stop()
    return sorted(events, key=lambda e: e.timestamp_ms)


def overlaps(events: list[StatusEvent], killed: dict[str, int] | None = None) -> list[str]:
    """Moments a task ran on two workers at once, according to the status history.

    A worker holds a task from its first status record for it until it records UNASSIGNED
    after having recorded a running-ish state (RUNNING, PAUSED or FAILED); a SIGKILLed
    worker (``killed``: worker id -> kill time in ms) holds it until it was killed. A worker
    starting a task while another still holds it is an overlap.
    """
    killed = killed or {}
    problems = []
    holders: dict[str, dict[str, bool]] = {}  # task -> {worker: has reported a running-ish state}
    for event in events:
        held = holders.setdefault(event.task, {})
        for worker, until in killed.items():
            if worker in held and until <= event.timestamp_ms:
                del held[worker]
        if event.worker_id not in held:
            others = [w for w in held if w != event.worker_id]
            if others:
                problems.append(f"task {event.task}: {event.worker_id} started it at {event.timestamp_ms} while "
                                f"{others} still held it")
            held[event.worker_id] = event.state != "UNASSIGNED"
        elif event.state == "UNASSIGNED" and held[event.worker_id]:
            del held[event.worker_id]
        else:
            held[event.worker_id] = held[event.worker_id] or event.state != "UNASSIGNED"
    return problems


def now_ms() -> int:
    """Wall-clock milliseconds (the clock Kafka record timestamps use)."""
    return int(time.time() * 1000)


async def task_owners(bootstrap: str, status_topic: str, connector: str) -> dict[str, str]:
    """task -> worker id of its latest RUNNING status (not since UNASSIGNED), from a status topic."""
    owners: dict[str, str] = {}
    for event in await status_history(bootstrap, status_topic, connector):
        if event.state == "RUNNING":
            owners[event.task] = event.worker_id
        elif event.state == "UNASSIGNED" and owners.get(event.task) == event.worker_id:
            owners.pop(event.task)
    return owners
