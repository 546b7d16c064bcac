"""The fault scenarios' harness: clusters, a worker group, loads, counting and the table row."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from mirrorline.localkafka.cluster import ClusterSpec, LocalCluster
from support.distributed import WorkerCluster, status_history
from support.faults import LoadGenerator, ProgressWatch, Tally, TopicReader, tally
from support.kafka import create_topic
from support.worker import Rest

#: Worker offset flush interval in the scenarios: a crashed task re-sends at most what was
#: acknowledged since the last flush (plus what was in flight).
FLUSH_MS = 1000

#: Duplicates allowed when a broker or worker crashes: a task that restarts re-sends what it
#: copied since its last offset flush plus what was in flight. The bound is the fastest copy
#: rate measured during the scenario (:class:`ProgressWatch`) times the flush interval plus
#: IN_FLIGHT_S for what was in flight (aiokafka keeps one request per broker in flight, each
#: batch up to 512 KiB per partition: less than a second of copying), and never below
#: CRASH_DUP_FLOOR. Small records copy fast, so this bound is loose; the table shows both.
IN_FLIGHT_S = 1.0
CRASH_DUP_FLOOR = 5_000

#: Duplicates allowed when nothing crashes (topic changes, retention): tasks are only stopped
#: gracefully, storing offsets of everything acknowledged, so a copy should never repeat; the
#: bound allows one restart of one task from its last flush at the scenarios' load rate.
GRACEFUL_DUP_BOUND = 2_000

HEADER = f"{'scenario':<40} {'records':>8} {'lost':>6} {'expect':>6} {'dup':>6} {'bound':>6} " \
         f"{'reorder':>7} {'failed':>6} {'stall':>6} {'secs':>6}  note"


@dataclass
class Clusters:
    """Source and target clusters of a scenario; ``*_cluster`` are set when a test may break them."""

    source: ClusterSpec
    target: ClusterSpec
    source_cluster: LocalCluster | None = None
    target_cluster: LocalCluster | None = None


# -- the scenario harness -------------------------------------------------------------------

@dataclass
class Scenario:
    """One scenario: its name, clusters, worker group and the loads it started."""

    label: str
    clusters: Clusters
    workers: WorkerCluster
    prefix: str
    connector: str
    started: float = field(default_factory=time.monotonic)
    loads: list[LoadGenerator] = field(default_factory=list)
    readers: list[TopicReader] = field(default_factory=list)
    watch: ProgressWatch | None = None
    #: free text for the table row (e.g. how long a broker was really down)
    note: str = ""
    #: records the load generator saw acknowledged that neither cluster holds (see converge)
    phantoms: int = 0

    @property
    def source(self) -> ClusterSpec:
        return self.clusters.source

    @property
    def target(self) -> ClusterSpec:
        return self.clusters.target

    def topic(self, suffix: str = "t") -> str:
        """A source topic name the flow mirrors."""
        return f"{self.prefix}-{suffix}"

    @staticmethod
    def remote(topic: str) -> str:
        """The remote topic name on B (DefaultReplicationPolicy, alias A)."""
        return f"A.{topic}"

    async def create_topic(self, topic: str, partitions: int, on_target: bool = False) -> None:
        """Create a topic on the source (or target) cluster."""
        await create_topic((self.target if on_target else self.source).bootstrap_servers, topic, partitions)

    def watch_progress(self, topic: str) -> None:
        """Measure, until the scenario reports, the longest time the remote topic stopped growing."""
        self.watch = ProgressWatch(self.target.bootstrap_servers, self.remote(topic)).start()

    def load(self, topic: str, partitions: int, rate: float, **kwargs) -> LoadGenerator:
        """Start a load generator on a source topic (stopped at the end of the scenario)."""
        generator = LoadGenerator(self.source.bootstrap_servers, topic, partitions, rate, **kwargs).start()
        self.loads.append(generator)
        return generator

    def mirror_config(self, tasks_max: int, **overrides) -> dict[str, str]:
        """The MirrorSourceConnector config of flow A->B for this scenario's topics."""
        config = {
            "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "source.cluster.alias": "A", "target.cluster.alias": "B",
            "source.cluster.bootstrap.servers": self.source.bootstrap_servers,
            "target.cluster.bootstrap.servers": self.target.bootstrap_servers,
            "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
            "topics": f"{self.prefix}-.*", "tasks.max": str(tasks_max),
            "refresh.topics.interval.seconds": "2", "sync.topic.configs.interval.seconds": "10",
        }
        config.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        return config

    # -- worker REST --
    def rest(self) -> Rest:
        """A REST client for a live worker of the group."""
        running = self.workers.running()
        assert running, f"no worker of the group is alive\n{self.workers.logs()}"
        return Rest(running[0].url)

    async def wait_healthy(self, timeout: float = 60.0) -> None:
        """Wait until every live worker answers /health with 200."""
        await self.workers.wait_healthy(timeout)

    async def start_mirror(self, tasks: int, tasks_max: int | None = None, **overrides) -> dict:
        """Create the MirrorSource connector and wait until it runs ``tasks`` tasks."""
        await self.wait_healthy()
        body = {"name": self.connector, "config": self.mirror_config(tasks_max or tasks, **overrides)}
        deadline = time.monotonic() + 60
        async with self.rest() as rest:
            while True:
                status, answer = await rest.call("POST", "/connectors", body)
                if status == 201:
                    break
                # 409 while the group rebalances, as in Connect
                assert status == 409 and time.monotonic() < deadline, f"create failed: {status} {answer}"
                await asyncio.sleep(0.5)
        return await self.wait_running(tasks)

    async def status(self) -> dict | None:
        """The connector's status from a live worker (None if unavailable)."""
        try:
            async with self.rest() as rest:
                code, body = await rest.call("GET", f"/connectors/{self.connector}/status")
        except OSError:
            return None
        return body if code == 200 else None

    async def wait_running(self, tasks: int, timeout: float = 90.0) -> dict:
        """Wait until the connector and exactly ``tasks`` tasks are RUNNING; fail with the last status."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = await self.status()
            if last and last["connector"]["state"] == "RUNNING" and len(last["tasks"]) == tasks \
                    and all(t["state"] == "RUNNING" for t in last["tasks"]):
                return last
            await asyncio.sleep(0.5)
        raise AssertionError(f"connector {self.connector} not RUNNING with {tasks} tasks after {timeout:.0f}s; "
                             f"last status: {_short_status(last)}\n{self.workers.logs()}")

    async def metrics(self) -> str:
        """The worker's /metrics text (every live worker's, concatenated)."""
        texts = []
        for worker in self.workers.running():
            async with Rest(worker.url) as rest:
                code, text = await rest.call("GET", "/metrics")
                if code == 200:
                    texts.append(text)
        return "\n".join(texts)

    async def task_failures(self) -> int:
        """How many times a task of the connector was reported FAILED (from the status topic)."""
        events = await status_history(self.workers.bootstrap, self.workers.status_topic, self.connector)
        return sum(1 for e in events if e.state == "FAILED")

    # -- counting --
    async def wait_copied(self, topic: str, count: int, timeout: float = 90.0) -> int:
        """Wait until the remote topic of ``topic`` holds at least ``count`` records; returns how many."""
        from support.faults import TopicReader

        reader = TopicReader(self.target.bootstrap_servers, self.remote(topic))
        deadline = time.monotonic() + timeout
        try:
            while True:
                held = await asyncio.to_thread(reader.end_total)
                if held >= count:
                    return held
                assert time.monotonic() < deadline, \
                    f"only {held} of {count} records reached {self.remote(topic)} in {timeout:.0f}s; " \
                    f"status: {_short_status(await self.status())}\n{self.workers.logs()}"
                await asyncio.sleep(0.5)
        finally:
            reader.close()

    async def converge(self, topic: str, expected: dict[int, list[bytes]], expected_lost: int = 0,
                       timeout: float = 120.0, unconfirmed: Collection[bytes] = ()) -> Tally:
        """Read the remote topic until no more than ``expected_lost`` records are missing, then count.

        ``expected``: partition -> source record ids (a load generator's ``acknowledged()``).
        Reads once more a flush interval later, so late duplicates are counted too.
        ``unconfirmed`` (a load generator's ``unconfirmed()``): records acknowledged without an
        offset. One of them missing from the target is checked against the source topic: if the
        source does not hold it either, the mirror had nothing to copy, so it is reported and not
        counted as lost.
        """
        reader = TopicReader(self.target.bootstrap_servers, self.remote(topic))
        self.readers.append(reader)
        deadline = time.monotonic() + timeout
        while True:
            got = await asyncio.to_thread(reader.catch_up)
            counted = tally(expected, got)
            if counted.lost <= expected_lost or time.monotonic() > deadline:
                break
            await asyncio.sleep(1.0)
        await asyncio.sleep(FLUSH_MS / 1000 + 0.5)
        got = await asyncio.to_thread(reader.catch_up)
        counted = tally(expected, got)
        if counted.lost > expected_lost and unconfirmed:
            expected = await self._without_phantoms(topic, expected, got, set(unconfirmed))
            counted = tally(expected, got)
        return counted

    async def _without_phantoms(self, topic: str, expected: dict[int, list[bytes]], got: dict[int, list[bytes]],
                                unconfirmed: set[bytes]) -> dict[int, list[bytes]]:
        """``expected`` without the unconfirmed records that neither the target nor the source holds."""
        on_target = {v for values in got.values() for v in values}
        missing = {v for values in expected.values() for v in values if v in unconfirmed and v not in on_target}
        if not missing:
            return expected
        source = TopicReader(self.source.bootstrap_servers, topic)
        self.readers.append(source)
        on_source = {v for values in (await asyncio.to_thread(source.catch_up)).values() for v in values}
        phantoms = missing - on_source
        self.phantoms += len(phantoms)
        if phantoms:
            print(f"{self.label}: {len(phantoms)} record(s) acknowledged to the load generator without an offset "
                  f"are on neither cluster (a producer-side report, not a mirror loss): {sorted(phantoms)[:5]}")
        return {p: [v for v in values if v not in phantoms] for p, values in expected.items()}

    def crash_dup_bound(self) -> int:
        """Duplicates a crash may cause here: peak copy rate x (flush interval + in-flight time)."""
        assert self.watch is not None, "call watch_progress() before the fault to measure the copy rate"
        peak = self.watch.peak_rate()
        return max(CRASH_DUP_FLOOR, int(peak * (FLUSH_MS / 1000 + IN_FLIGHT_S)))

    def row(self, counted: Tally, expected_lost: int, dup_bound: int, failures: int) -> str:
        """The scenario's table row (``stall``: longest time B's copy stopped growing, if watched)."""
        seconds = time.monotonic() - self.started
        stall = f"{self.watch.longest_stall():.1f}" if self.watch is not None else "-"
        return (f"{self.label:<40} {counted.records:>8} {counted.lost:>6} {expected_lost:>6} "
                f"{counted.duplicated:>6} {dup_bound:>6} {counted.out_of_order:>7} {failures:>6} {stall:>6} "
                f"{seconds:>6.1f}  {self.note}")

    async def finish(self, counted: Tally, report, expected_lost: int, dup_bound: int | None, tasks: int) -> None:
        """Report the row, then assert: loss as expected, duplicates bounded, order kept, tasks RUNNING.

        ``dup_bound`` None: :meth:`crash_dup_bound`.
        """
        if self.watch is not None:
            self.watch.stop()
            # kept next to the worker logs, to see when each partition stalled
            (self.workers.directory / "progress.json").write_text(json.dumps(
                [[round(t - self.started, 2), ends] for t, ends in self.watch.samples]))
        if dup_bound is None:
            dup_bound = self.crash_dup_bound()
        failures = await self.task_failures()
        report(self.row(counted, expected_lost, dup_bound, failures))
        peak = f"; peak copy rate {self.watch.peak_rate():.0f} records/s" if self.watch is not None else ""
        print(f"{self.label}: {counted.summary()}; task FAILED reports: {failures}{peak}")
        status = await self.wait_running(tasks, timeout=30)
        assert counted.lost == expected_lost, f"{self.label}: {counted.summary()}"
        assert counted.out_of_order == 0, f"{self.label}: {counted.summary()}"
        assert counted.duplicated <= dup_bound, f"{self.label}: {counted.summary()} (bound {dup_bound})"
        assert all(t["state"] == "RUNNING" for t in status["tasks"])

    def close(self) -> None:
        """Stop loads, readers, the progress watch and the workers."""
        if self.watch is not None:
            self.watch.stop()
        for generator in self.loads:
            generator.stop(timeout=10)
        for reader in self.readers:
            reader.close()
        self.workers.close()


def _short_status(status: dict | None) -> str:
    if not status:
        return repr(status)
    tasks = [(t["id"], t["state"], (t.get("trace") or "").strip().splitlines()[-1:]) for t in status["tasks"]]
    return f"connector {status['connector']['state']}, tasks {tasks}"
