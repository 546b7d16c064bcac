"""Benchmark: end-to-end latency at fixed rates, mirrorline (batch forwarding on and off) and Java MM2.

Run from the repository root (not collected by pytest: the file is named ``bench_*.py``)::

    .venv/bin/python tests/benchmarks/bench_latency.py                         # 1/10/30 MB/s, 5 min each
    .venv/bin/python tests/benchmarks/bench_latency.py --rates 10 --seconds 30 --allow-load   # smoke run

For each rate and engine, on the same fresh clusters (Kafka's broker defaults): a fresh 12-partition
topic on A is mirrored to B with one ``mm2.properties`` (a fresh source alias per run); once the
engine has copied a first record, librdkafka (confluent-kafka) writes ``--record-size`` (1000) byte
records to A at the fixed rate for ``--seconds``, round-robin over the partitions, and a librdkafka
consumer on B takes each copy's arrival time minus its CreateTime (which both engines keep). A
second librdkafka consumer reads the same records on A: its p50/p99 (``src``) is what the source
side alone contributes, the floor under every engine's figure. The writer lingers
``--source-linger-ms`` (5, librdkafka's default): with 0 every record is its own produce batch, and
at 10 MB/s on this 2-core machine A then acknowledged records 170-220 ms after they were written
(p50, no mirror running), so the end-to-end figures measured the writer's backlog more than the
mirror (every 10 and 30 MB/s figure taken before 2026-11-29 was). Per
run: p50, p99, p99.9 of the steady state (records written ``--settle``, 30, seconds or more after
the rate started), p99 over the whole run and the catch-up time (the first second from which the
median stays under 500 ms for 10 s: both engines start behind when the rate jumps from nothing to
30 MB/s on this machine), records seen, the engine's CPU-seconds over the measured window and its
CPU-seconds per minute once settled (``--settle`` seconds after the rate started, until the last write:
Java's JIT makes MM2's CPU fall through the first minutes, so the whole-window figure flatters a
short run's ratio to MM2), and the
1-minute load average sampled every 5 s (its peak). A run whose peak load is above ``--max-load``
(1.5) is repeated up to ``--repeats`` times; one still above is flagged in the table. Engines:
``mm2`` (Java MM2 dedicated mode), ``mirrorline`` (batch forwarding, the default) and
``mirrorline-records`` (``batch.forwarding.enabled=false``, record by record as MM2); on request
also ``mirrorline-gather-15``, ``mirrorline-gather-10``, ``mirrorline-gather-5``, ``mirrorline-gather-3`` and
``mirrorline-gather-0`` (``replication.fetch.gather.ms`` 15, 10, 5, 3 and 0 instead of 25: lower latency at low
rates for more CPU, at every rate), ``mirrorline-fixed-25`` (``replication.fetch.gather.trickle.ms = 25``:
25 ms at every rate, the default before the wait followed the flow's rate), ``mirrorline-trickle-5``
(a 5-ms trickle wait instead of 10),
``mirrorline-shared``, ``mirrorline-gather-5-shared`` and ``mirrorline-gather-10-shared``
(``tasks.share.clients=true``: a connector's tasks share one consumer and producer)
``mirrorline-asyncio`` (the default on asyncio's own event loop, ``MIRRORLINE_EVENT_LOOP=asyncio``,
instead of uvloop) and ``mirrorline-processes-2`` (``mirrorline mm2 --processes 2``: each of the two tasks
on an event loop, and a process, of its own). ``floor-gather-10``, ``floor-gather-5``, ``floor-gather-3`` and ``floor-min-bytes-1``
are not mirrors but ``forward_floor.py``, a bare fetch-and-produce loop with mirrorline's codecs
(a 10, 5 or 3 ms gather, or MM2's ``fetch.min.bytes=1``): the least CPU a round trip can cost in
Python, the floor under any rewrite of mirrorline's hot path; ``floor-fetch-gather-10`` and
``floor-fetch-gather-5`` run its fetch loop with mirrorline's producer (a rewrite of the fetch
side alone). ``ENGINE@NAME`` runs a mirrorline engine on the interpreter given by
``--python NAME=PATH`` (a venv with mirrorline installed, e.g. one bootstrapped with
``PYTHON=python3.13``). ``--rounds N`` runs the engines N times in turn on the same clusters and
adds a table of medians over the rounds, each run compared with its own round's MM2 run: one
sitting on a shared machine moves every engine's p99 by tens of per cent. ``--rotate`` starts each
round one engine further along the list (the run right after MM2's inherits its write-back).

Writes ``latency-cdf.png`` (the latency distributions, one panel per rate), ``latency-p99.png``
and ``latency-results.json`` into ``--out``; with ``--keep-logs`` also each engine's log and a
per-second timeline of each run (records, median and worst latency by second of CreateTime), which
tells one long stall from a tail spread over the run. See tests/benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import scale_kit  # noqa: F401 - puts tests/ and this directory on sys.path
import call_count  # noqa: E402
from scale_kit import (
    DEFAULT_MAX_LOAD,
    Engine,
    LoadWatch,
    create_topics,
    engine_command,
    load_banner,
    log,
    percentile,
    refuse_if_loaded,
    stop_cleanly_on_sigterm,
)

warnings.filterwarnings("ignore", category=DeprecationWarning)

from confluent_kafka import Consumer, Producer  # noqa: E402

from bench_mirror import _base_port  # noqa: E402
from mirrorline.localkafka.artifacts import KAFKA_VERSION, resolve_kafka_classpath, resolve_mm2_classpath  # noqa: E402
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES  # noqa: E402
from mirrorline.localkafka.manager import LocalKafka  # noqa: E402

PARTITIONS = 12
#: a second of CreateTime counts as caught up when its median latency is under this
CAUGHT_UP_MS = 500.0
#: ... and so do the seconds after it, for this long
CAUGHT_UP_FOR_S = 10
ENGINES = {"mm2": [], "mirrorline": [], "mirrorline-records": ["batch.forwarding.enabled = false"],
           # the fetch gather wait's trade-off (replication.fetch.gather.ms, 25 by default): not run unless asked
           "mirrorline-gather-5": ["replication.fetch.gather.ms = 5"],
           "mirrorline-gather-10": ["replication.fetch.gather.ms = 10"],
           "mirrorline-gather-15": ["replication.fetch.gather.ms = 15"],
           "mirrorline-gather-0": ["replication.fetch.gather.ms = 0"],
           "mirrorline-gather-3": ["replication.fetch.gather.ms = 3"],
           # the wait before it followed the flow's rate (2026-12-01): 25 ms at every rate
           "mirrorline-fixed-25": ["replication.fetch.gather.trickle.ms = 25"],
           "mirrorline-trickle-5": ["replication.fetch.gather.trickle.ms = 5"],
           # a connector's tasks sharing one consumer and producer (tasks.share.clients=true; false by default)
           "mirrorline-shared": ["tasks.share.clients = true"],
           "mirrorline-gather-5-shared": ["replication.fetch.gather.ms = 5", "tasks.share.clients = true"],
           "mirrorline-gather-10-shared": ["replication.fetch.gather.ms = 10", "tasks.share.clients = true"],
           "mirrorline-shared-trickle-5": ["tasks.share.clients = true", "replication.fetch.gather.trickle.ms = 5"],
           # the default engine on asyncio's own event loop instead of uvloop: not run unless asked
           "mirrorline-asyncio": [],
           # the default engine at a higher scheduling priority (nice -5): a diagnostic, not a setting; it
           # tells how much of the tail is the single event loop waiting for a core the brokers hold
           "mirrorline-nice-5": [],
           # the default settings over two worker processes (mirrorline mm2 --processes 2): each task's event
           # loop is scheduled on its own, as MM2's threads are
           "mirrorline-processes-2": [],
           # not a mirror: the bare forwarding loop of forward_floor.py, the least CPU a Python round trip
           # costs (its arguments, not properties); not run unless asked
           "floor-gather-10": ["--gather-ms", "10"], "floor-gather-5": ["--gather-ms", "5"],
           "floor-gather-3": ["--gather-ms", "3"], "floor-min-bytes-1": ["--gather-ms", "500", "--min-bytes", "1"],
           # ... its fetch loop writing through mirrorline's producer: what a rewrite of the fetch side alone leaves
           "floor-fetch-gather-10": ["--gather-ms", "10", "--producer", "mirrorline"],
           "floor-fetch-gather-5": ["--gather-ms", "5", "--producer", "mirrorline"]}
#: environment variables an engine runs with, on top of this process's
ENGINE_ENV = {"mirrorline-asyncio": {"MIRRORLINE_EVENT_LOOP": "asyncio"}}
#: what an engine's command is run under (nice execs it, so the process measured is the engine's)
ENGINE_PREFIX = {"mirrorline-nice-5": ["nice", "-n", "-5"]}
#: command-line arguments an engine's ``mirrorline mm2`` command gets after the properties file
ENGINE_ARGS = {"mirrorline-processes-2": ["--processes", "2"]}
#: the engines run when --engines is not given
DEFAULT_ENGINES = ("mm2", "mirrorline", "mirrorline-records")


@dataclass
class LatencyRun:
    """One engine at one rate."""

    engine: str
    rate_mb_s: float
    attempt: int
    #: which pass over the engines this run belongs to (``--rounds``); ratios compare within a round
    round: int = 1
    records: int = 0
    expected: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None
    #: p99 over the whole run, the catch-up after the rate started included
    p99_all_ms: float | None = None
    #: seconds from the first record until the copy kept up (see :func:`catch_up_seconds`)
    catch_up_s: float | None = None
    cpu_s: float | None = None
    #: CPU-seconds per minute from --settle seconds after the rate started until the last write: the
    #: steady cost, once Java's JIT has warmed up (MM2's CPU falls through the first minutes of a run)
    steady_cpu_per_min: float | None = None
    #: the same records read on A (the source side's share of the latency), steady state only
    source_p50_ms: float | None = None
    source_p99_ms: float | None = None
    load_peak: float = 0.0
    flagged: bool = False
    #: the engine's Python calls over a window of the run (--count-calls; :class:`call_count.CallCount`)
    calls: call_count.CallCount | None = None
    samples: list[float] = field(default_factory=list, repr=False)
    #: (CreateTime in ms, latency in ms) of every record seen, in arrival order
    timeline: list[tuple[float, float]] = field(default_factory=list, repr=False)


def properties(alias: str, a: str, b: str, topic: str, tasks: int, extra: list[str]) -> str:
    return "\n".join(["# written by tests/benchmarks/bench_latency.py", f"clusters = {alias}, B",
                      f"{alias}.bootstrap.servers = {a}", f"B.bootstrap.servers = {b}", f"{alias}->B.enabled = true",
                      f"{alias}->B.topics = {topic}", f"{alias}->B.tasks.max = {tasks}",
                      *(f"{alias}->B.{line}" for line in extra), SINGLE_BROKER_MM2_PROPERTIES])


#: how long the readers keep reading after the last write, for records still on their way
DRAIN_S = 30.0


def _read_latencies(bootstrap: str, topic: str, value: bytes, expected: int, path: str, ready, stop) -> None:
    """A reader process: every record of ``topic`` whose value is ``value``, its CreateTime and its
    latency (arrival minus CreateTime, ms), written to ``path`` as two arrays of doubles once
    ``stop`` is set and ``expected`` records arrived, or DRAIN_S after ``stop``."""
    from array import array

    from confluent_kafka import Consumer as ReaderConsumer
    reader = ReaderConsumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4().hex[:6]}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "topic.metadata.refresh.interval.ms": 1000, "fetch.wait.max.ms": 10})
    reader.subscribe([topic])
    while not reader.assignment():
        reader.poll(0.1)
    ready.set()
    created_at, latencies = array("d"), array("d")
    drain_deadline = None
    while True:
        # consume() returns when it has 1000 messages or after its timeout: with 0.2 s, a record that
        # arrived early in the wait was stamped up to 200 ms late at low rates (the p50 of ~120 ms both
        # engines showed at 1 MB/s until 2026-11-27)
        messages = reader.consume(1000, 0.005)
        now = time.time() * 1000
        for message in messages:
            if message.error() is None and message.value() == value:
                created = message.timestamp()[1]
                created_at.append(created)
                latencies.append(now - created)
        if stop.is_set():
            drain_deadline = drain_deadline or time.monotonic() + DRAIN_S
            if len(latencies) >= expected or time.monotonic() > drain_deadline:
                break
    reader.close()
    with open(path, "wb") as out:
        array("q", [len(latencies)]).tofile(out)
        created_at.tofile(out)
        latencies.tofile(out)


class LatencyReader:
    """A librdkafka consumer in a process of its own that timestamps the arrival of every record."""

    def __init__(self, bootstrap: str, topic: str, value: bytes, expected: int, path: Path):
        import multiprocessing
        context = multiprocessing.get_context("spawn")  # no fork of a process holding librdkafka threads
        self._path = path
        self._ready, self._stop = context.Event(), context.Event()
        self._process = context.Process(target=_read_latencies, daemon=True,
                                        args=(bootstrap, topic, value, expected, str(path), self._ready, self._stop))
        self._process.start()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the reader has joined its group (has partitions assigned)."""
        if not self._ready.wait(timeout):
            raise TimeoutError(f"latency reader for {self._path.name} did not get its partitions within {timeout:g} s")

    def finish(self, drain_s: float) -> list[tuple[float, float]]:
        """Stop reading (after the records still expected, at most ``drain_s``); (CreateTime, latency) of each."""
        from array import array
        self._stop.set()
        self._process.join(drain_s + 60)
        if self._process.is_alive() or not self._path.exists():
            raise RuntimeError(f"latency reader for {self._path.name} did not finish (exit code "
                               f"{self._process.exitcode})")
        with open(self._path, "rb") as source:
            count = array("q")
            count.fromfile(source, 1)
            created_at, latencies = array("d"), array("d")
            created_at.fromfile(source, count[0])
            latencies.fromfile(source, count[0])
        return list(zip(created_at, latencies))

    def kill(self) -> None:
        """Stop the process if it still runs (a failed run)."""
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)


def split_engine(engine: str) -> tuple[str, str | None]:
    """``"mirrorline-gather-10@py313"`` -> ``("mirrorline-gather-10", "py313")``: the settings' name
    and the ``--python`` interpreter it runs on (None: this benchmark's own)."""
    base, _, interpreter = engine.partition("@")
    return base, interpreter or None


def parse_interpreters(specs: list[str]) -> dict[str, str]:
    """``--python NAME=PATH`` options as {NAME: PATH}; ValueError names a malformed one."""
    found = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path or "@" in name:
            raise ValueError(f"--python expects NAME=PATH (e.g. py313=../py313/.venv/bin/python), not {spec!r}")
        found[name] = path
    return found


def interpreter_banner(path: str) -> str:
    """Which CPython ``path`` is, and how it was built: the same mirror used about a tenth more CPU
    on this machine's pyenv build (no PGO/LTO) than on Debian's (docs/performance.md)."""
    probe = ("import sys, sysconfig, platform; print(sys.version.split()[0], sys.executable, platform.python_compiler(), "
             "'optimizations' if '--enable-optimizations' in (sysconfig.get_config_var('CONFIG_ARGS') or '') else '')")
    try:
        out = subprocess.run([path, "-c", probe], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        raise SystemExit(f"bench_latency.py: error: cannot run Python {path}: {exc}") from exc
    if out.returncode != 0:
        raise SystemExit(f"bench_latency.py: error: Python {path} failed: {out.stderr.strip()[-300:]}")
    return out.stdout.strip()


def measure(engine: str, alias: str, a: str, b: str, rate_mb_s: float, args, tmp: Path, attempt: int,
            round_: int = 1) -> LatencyRun:
    """One latency run (module docstring)."""
    topic = f"lat-{uuid.uuid4().hex[:6]}"
    create_topics(a, [topic], PARTITIONS)
    props = tmp / f"{alias}.properties"
    base, interpreter = split_engine(engine)
    remote = f"{alias}.{topic}"
    if base.startswith("floor-"):
        command = [sys.executable, str(Path(__file__).with_name("forward_floor.py")), "--source", a, "--target", b,
                   "--topic", topic, "--remote", remote, "--tasks", str(args.tasks), *ENGINES[base]]
    else:
        props.write_text(properties(alias, a, b, topic, args.tasks, ENGINES[base]))
        command = [*engine_command("mm2" if base == "mm2" else "mirrorline", props), *ENGINE_ARGS.get(base, [])]
    if interpreter is not None:  # the same mirrorline command on another Python (a venv with mirrorline installed)
        command = [args.interpreters[interpreter], *command[1:]]
    command = [*ENGINE_PREFIX.get(base, []), *command]
    env = dict(ENGINE_ENV.get(base, {}))
    window = None
    if args.count_calls and base != "mm2":
        window = call_count.Window(tmp / f"calls-{alias}")
        env.update(call_count.engine_env(window.directory))
    running = Engine(command, tmp / f"{alias}-{engine}.log", env=env or None, name=engine)
    consumer = Consumer({"bootstrap.servers": b, "group.id": f"lat-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000, "fetch.wait.max.ms": 10})
    producer = Producer({"bootstrap.servers": a, "linger.ms": args.source_linger_ms, "acks": "1",
                         "queue.buffering.max.messages": 1_000_000})
    result = LatencyRun(engine, rate_mb_s, attempt, round_)
    watch = LoadWatch()
    readers: dict[str, LatencyReader] = {}
    try:
        consumer.subscribe([remote])
        deadline = time.monotonic() + 180
        warm = False
        while not warm:  # the engine runs and has created the remote topic once a first record arrives
            running.check_alive()
            producer.produce(topic, b"warm-up", partition=0)
            producer.flush(5)
            end = time.monotonic() + 2
            while time.monotonic() < end and not warm:
                message = consumer.poll(0.2)
                warm = message is not None and message.error() is None
            if time.monotonic() > deadline:
                raise TimeoutError(f"{engine}: nothing mirrored within 180 s")
        time.sleep(3)
        while consumer.poll(0.1) is not None:  # drain the warm-up records
            pass
        consumer.unsubscribe()  # the readers below measure; this one would only buffer copies unread
        value = os.urandom(args.record_size)
        per_second = rate_mb_s * 1e6 / args.record_size
        total = int(per_second * args.seconds)
        # Each reader is a process of its own: as threads of the writer's process they shared its
        # interpreter lock, and from about 10 MB/s the writer and the readers queued behind each other.
        readers = {side: LatencyReader(bootstrap, read_topic, value, total, tmp / f"{alias}-{side}.latencies")
                   for side, bootstrap, read_topic in (("B", b, remote), ("A", a, topic))}
        for reader in readers.values():
            reader.wait_ready()
        cpu0 = running.cpu_s()
        start = time.perf_counter()
        sent, next_load = 0, 0.0
        settled: tuple[float, float] | None = None  # (wall clock, CPU-seconds) once --settle has passed
        while sent < total:
            elapsed = time.perf_counter() - start
            if elapsed >= next_load:
                watch.sample()
                next_load += 5
            if settled is None and elapsed >= args.settle:
                settled = (time.perf_counter(), running.cpu_s())
                if window is not None:
                    window.start(running.pids())
            if window is not None and window.running and elapsed >= args.settle + args.count_calls:
                window.stop()
            due = min(total, int(elapsed * per_second) + 1)
            while sent < due:
                try:
                    producer.produce(topic, value, partition=sent % PARTITIONS)
                    sent += 1
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
            running.check_alive()
            time.sleep(0.001)
        if window is not None and window.running:
            window.stop()
        if settled is not None and time.perf_counter() - settled[0] >= 10:
            result.steady_cpu_per_min = (running.cpu_s() - settled[1]) / (time.perf_counter() - settled[0]) * 60
        producer.flush(60)
        if window is not None and window.seconds:
            result.calls = window.read()  # after the last write: writing the profiles must not stall the writer
        timeline = readers["B"].finish(DRAIN_S)
        source_timeline = readers["A"].finish(DRAIN_S)
        result.cpu_s = running.cpu_s() - cpu0
        watch.sample()
        result.timeline = timeline
        result.records, result.expected = len(timeline), total
        summarize(result, args.settle)
        result.source_p50_ms, result.source_p99_ms = steady_percentiles(source_timeline, args.settle, (0.5, 0.99))
        result.load_peak = watch.peak
        result.flagged = result.load_peak > args.max_load
        if len(timeline) < total:
            log(f"    warning: {engine} saw {len(timeline)} of {total} records within {DRAIN_S:g} s of the last write")
        return result
    finally:
        for reader in readers.values():
            reader.kill()
        consumer.close()
        running.stop()
        if args.keep_logs:
            shutil.copy(running.log_path, args.out / f"engine-{alias}-{engine}.log")


def describe_calls(count: call_count.CallCount) -> str:
    """One line: what a counted window saw."""
    line = (f"{count.calls:,} Python calls in {count.seconds:.0f} s: {count.per_second('fetches'):.0f} fetches/s, "
            f"{count.per_second('produces'):.0f} produce requests/s, {count.per_second('batches'):.0f} batches/s")
    if count.batches_per_fetch() is not None:
        line += f" ({count.batches_per_fetch():.1f} per fetch)"
    if count.calls_per_batch() is not None:
        line += f", {count.calls_per_batch():.0f} calls per batch in all"
    if count.missing:
        line += (f"; WARNING: nothing matched {', '.join(count.missing)}: the hot path was renamed, update "
                 f"call_count.MARKERS")
    return line


def print_call_counts(runs: list[LatencyRun]) -> None:
    """The counted windows (--count-calls), and per rate and interpreter the calls a batch and a round trip
    cost, where two engines' batches per fetch differ enough to tell them apart."""
    counted = [r for r in final_attempts(runs) if r.calls is not None]
    if not counted:
        return
    log("")
    log("=== Python calls (cProfile windows; a round trip is a fetch and its produce request) ===")
    groups: dict[tuple[float, str | None], list[LatencyRun]] = {}
    for run in counted:
        log(f"{run.rate_mb_s:g} MB/s {run.engine}, round {run.round}: {describe_calls(run.calls)}")
        groups.setdefault((run.rate_mb_s, split_engine(run.engine)[1]), []).append(run)
    for (rate, interpreter), group in groups.items():
        costs = call_count.split_costs([r.calls for r in group])
        engines = ", ".join(sorted({r.engine for r in group}))
        if costs is None:
            log(f"{rate:g} MB/s ({engines}): batches per fetch too alike to split a batch's calls from a round "
                f"trip's; add an engine with another trickle wait (e.g. mirrorline-trickle-5)")
        else:
            log(f"{rate:g} MB/s ({engines}): about {costs[0]:.0f} calls per forwarded batch and {costs[1]:.0f} "
                f"per round trip")


def by_second(timeline: list[tuple[float, float]]) -> dict[int, list[float]]:
    """The latencies of a run grouped by second of CreateTime from its first record, each sorted."""
    seconds: dict[int, list[float]] = {}
    start = min((created for created, _ in timeline), default=0.0)
    for created, latency in timeline:
        seconds.setdefault(int((created - start) // 1000), []).append(latency)
    for values in seconds.values():
        values.sort()
    return seconds


def catch_up_seconds(seconds: dict[int, list[float]]) -> float | None:
    """The first second from which the median latency stays under CAUGHT_UP_MS for CAUGHT_UP_FOR_S
    seconds: how long the engine took to keep up once the rate started (None: it never did)."""
    last = max(seconds, default=-1)
    for start in sorted(seconds):
        window = range(start, min(start + CAUGHT_UP_FOR_S, last + 1))
        if all(second in seconds and seconds[second][len(seconds[second]) // 2] < CAUGHT_UP_MS
               for second in window):
            return float(start)
    return None


def steady_latencies(timeline: list[tuple[float, float]], settle_s: float) -> list[float]:
    """The latencies of the records written ``settle_s`` or more after the first one, sorted."""
    start = min((created for created, _ in timeline), default=0.0)
    return sorted(latency for created, latency in timeline if created - start >= settle_s * 1000)


def steady_percentiles(timeline: list[tuple[float, float]], settle_s: float, quantiles) -> list[float | None]:
    """Percentiles of :func:`steady_latencies`."""
    steady = steady_latencies(timeline, settle_s)
    return [percentile(steady, q) for q in quantiles]


def summarize(run: LatencyRun, settle_s: float) -> None:
    """Fill in the percentiles: p50/p99/p99.9 over the records written ``settle_s`` or more after the
    first (the steady state), p99 also over all of them, and the catch-up time."""
    steady = steady_latencies(run.timeline, settle_s)
    everything = sorted(latency for _, latency in run.timeline)
    run.samples = steady
    run.p50_ms, run.p99_ms, run.p999_ms = (percentile(steady, q) for q in (0.5, 0.99, 0.999))
    run.p99_all_ms = percentile(everything, 0.99)
    run.catch_up_s = catch_up_seconds(by_second(run.timeline))


def write_timeline(run: LatencyRun, out: Path) -> Path:
    """Per second of CreateTime: records, and their median and worst latency, as CSV.

    A p99 made of one stall shows here as a run of seconds whose worst latency climbs and falls
    together; a tail spread over the run shows as isolated seconds.
    """
    path = out / f"timeline-{run.rate_mb_s:g}MBs-{run.engine}-round{run.round}-try{run.attempt}.csv"
    seconds = by_second(run.timeline)
    lines = ["second,records,p50_ms,max_ms"]
    for second in sorted(seconds):
        values = seconds[second]
        lines.append(f"{second},{len(values)},{values[len(values) // 2]:.1f},{values[-1]:.1f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def ratios_to_mm2(run: LatencyRun, runs: list[LatencyRun]) -> tuple[float | None, float | None, float | None]:
    """``run``'s p99, CPU-seconds and steady CPU as multiples of MM2's at the same rate in the same
    round (its last attempt; MM2's last run at that rate when the round has none), or None."""
    mm2 = [r for r in runs if r.engine == "mm2" and r.rate_mb_s == run.rate_mb_s]
    mm2 = [r for r in mm2 if r.round == run.round] or mm2
    if not mm2 or run.engine == "mm2":
        return None, None, None
    base = mm2[-1]

    def ratio(mine, theirs):
        return mine / theirs if mine is not None and theirs else None
    return (ratio(run.p99_ms, base.p99_ms), ratio(run.cpu_s, base.cpu_s),
            ratio(run.steady_cpu_per_min, base.steady_cpu_per_min))


def print_table(runs: list[LatencyRun]) -> None:
    width = max([20, *(len(r.engine) for r in runs)])
    head = (f"{'MB/s':>5} {'engine':<{width}} {'round':>5} {'try':>3} {'records':>9} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} "
            f"{'p99 all':>8} {'catch-up s':>10} {'src p50':>8} {'src p99':>8} {'CPU s':>7} {'p99/MM2':>7} "
            f"{'CPU/MM2':>7} {'CPU/min':>7} {'steady/MM2':>10} {'load':>5}")
    log(head)
    log("-" * len(head))

    def fmt(v, unit=""):
        return f"{v:.1f}" if v is not None and not unit else f"{v:.2f}{unit}" if v is not None else "-"
    for r in runs:
        p99_ratio, cpu_ratio, steady_ratio = ratios_to_mm2(r, runs)
        log(f"{r.rate_mb_s:>5g} {r.engine:<{width}} {r.round:>5} {r.attempt:>3} {r.records:>9} {fmt(r.p50_ms):>8} {fmt(r.p99_ms):>8} "
            f"{fmt(r.p999_ms):>9} {fmt(r.p99_all_ms):>8} {fmt(r.catch_up_s):>10} {fmt(r.source_p50_ms):>8} "
            f"{fmt(r.source_p99_ms):>8} {fmt(r.cpu_s):>7} {fmt(p99_ratio, 'x'):>7} {fmt(cpu_ratio, 'x'):>7} "
            f"{fmt(r.steady_cpu_per_min):>7} {fmt(steady_ratio, 'x'):>10} {r.load_peak:>5.1f}"
            + ("  <-- taken above --max-load: not trustworthy" if r.flagged else ""))


def final_attempts(runs: list[LatencyRun]) -> list[LatencyRun]:
    """The last attempt of each (rate, round, engine), in the order they ran."""
    final: dict[tuple[float, int, str], LatencyRun] = {}
    for r in runs:
        final[(r.rate_mb_s, r.round, r.engine)] = r
    return list(final.values())


def _median(values) -> float | None:
    """The median of the values that are not None, or None."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def round_order(engines: list[str], round_: int, rotate: bool) -> list[str]:
    """The engines in the order round ``round_`` (from 1) runs them: as listed, or with ``rotate``
    started ``round_ - 1`` places further along."""
    if not rotate or not engines:
        return list(engines)
    shift = (round_ - 1) % len(engines)
    return list(engines[shift:]) + list(engines[:shift])


def round_summary(runs: list[LatencyRun]) -> list[dict]:
    """Per rate and engine over the rounds (``--rounds``): medians of p50, p99 and settled CPU per
    minute, the medians of the per-round ratios to MM2 (each round's own MM2 run is its yardstick,
    so a sitting that slowed every engine down cancels out), and in how many rounds the engine was
    under MM2 on both counts (p99 at or below, settled CPU below)."""
    final = final_attempts(runs)
    rows = []
    for rate in sorted({r.rate_mb_s for r in final}):
        engines = list(dict.fromkeys(r.engine for r in final if r.rate_mb_s == rate))
        for engine in engines:
            mine = [r for r in final if r.rate_mb_s == rate and r.engine == engine]
            # (p99 ratio, CPU ratio) per round; the settled CPU's where the run has one
            pairs = [(p99, steady if steady is not None else cpu)
                     for p99, cpu, steady in (ratios_to_mm2(r, runs) for r in mine)]
            p99_ratios = [p99 for p99, _ in pairs if p99 is not None]
            rows.append({"rate": rate, "engine": engine, "rounds": len(mine),
                         "p50_ms": _median(r.p50_ms for r in mine), "p99_ms": _median(r.p99_ms for r in mine),
                         "cpu_per_min": _median(r.steady_cpu_per_min for r in mine),
                         "p99_ratio": _median(p99_ratios), "cpu_ratio": _median(cpu for _, cpu in pairs),
                         "under_both": None if engine == "mm2" or not p99_ratios else
                         sum(1 for p99, cpu in pairs if p99 is not None and cpu is not None and p99 <= 1 and cpu < 1),
                         "flagged": sum(r.flagged for r in mine)})
    return rows


def print_round_summary(runs: list[LatencyRun]) -> None:
    """The medians over the rounds (:func:`round_summary`), when there was more than one."""
    rows = round_summary(runs)
    if not any(row["rounds"] > 1 for row in rows):
        return
    log("")
    log("=== medians over the rounds (ratios: each round against its own MM2 run) ===")
    width = max([20, *(len(row["engine"]) for row in rows)])
    head = (f"{'MB/s':>5} {'engine':<{width}} {'rounds':>6} {'p50 ms':>8} {'p99 ms':>8} {'CPU/min':>8} "
            f"{'p99/MM2':>8} {'CPU/MM2':>8} {'under MM2 on both':>18} {'loaded':>6}")
    log(head)
    log("-" * len(head))

    def fmt(v, unit=""):
        return "-" if v is None else f"{v:.2f}{unit}" if unit else f"{v:.1f}"
    for row in rows:
        under = "-" if row["under_both"] is None else f"{row['under_both']} of {row['rounds']}"
        log(f"{row['rate']:>5g} {row['engine']:<{width}} {row['rounds']:>6} {fmt(row['p50_ms']):>8} "
            f"{fmt(row['p99_ms']):>8} {fmt(row['cpu_per_min']):>8} {fmt(row['p99_ratio'], 'x'):>8} "
            f"{fmt(row['cpu_ratio'], 'x'):>8} {under:>18} {row['flagged']:>6}")
    log("CPU/MM2 here is the settled CPU per minute's ratio (the whole window's where a run had no settled figure)")


def plot(runs: list[LatencyRun], out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    final = {}
    for r in runs:  # the last attempt of each engine and rate
        final[(r.rate_mb_s, r.engine)] = r
    rates = sorted({rate for rate, _ in final})
    written = []
    figure, axes = plt.subplots(1, len(rates), figsize=(5 * len(rates), 4), squeeze=False)
    for axis, rate in zip(axes[0], rates):
        for (r_rate, engine), r in sorted(final.items()):
            if r_rate != rate or not r.samples:
                continue
            xs = r.samples
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            axis.plot(xs, ys, label=f"{engine}" + (" (loaded)" if r.flagged else ""),
                      linestyle="--" if engine == "mm2" else "-")
        axis.set_xscale("log")
        axis.set_xlabel("arrival on B - CreateTime (ms, log scale; after the settle time)")
        axis.set_ylabel("fraction of records")
        axis.set_title(f"{rate:g} MB/s of {PARTITIONS}-partition 1000 B records")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    figure.tight_layout()
    path = out / "latency-cdf.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    written.append(path)

    figure, axis = plt.subplots(figsize=(6.4, 4.2))
    for engine in sorted({e for _, e in final}):
        points = [(rate, final[(rate, engine)].p99_ms) for rate in rates
                  if (rate, engine) in final and final[(rate, engine)].p99_ms is not None]
        axis.plot([p for p, _ in points], [v for _, v in points], marker="o", label=engine,
                  linestyle="--" if engine == "mm2" else "-")
    axis.set_xlabel("rate (MB/s)")
    axis.set_ylabel("p99 latency (ms)")
    axis.set_title("p99 end-to-end latency")
    axis.grid(True, alpha=0.3)
    axis.legend()
    figure.tight_layout()
    path = out / "latency-p99.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    global PARTITIONS  # --partitions sets it for the whole run
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="1,10,30", help="comma list of MB/s")
    parser.add_argument("--seconds", type=float, default=300.0, help="length of each measured run")
    parser.add_argument("--settle", type=float, default=30.0,
                        help="p50/p99/p99.9 leave out the records of the run's first SETTLE seconds (the catch-up "
                             "after the rate starts, reported apart as 'p99 all' and 'catch-up s')")
    parser.add_argument("--engines", default=",".join(DEFAULT_ENGINES), help=f"comma list of {', '.join(ENGINES)}")
    parser.add_argument("--tasks", type=int, default=2, help="tasks.max (both engines)")
    parser.add_argument("--partitions", type=int, default=PARTITIONS,
                        help="partitions of the mirrored topic (12: the issue's shape; fewer or more shows how the "
                             "CPU of a trickle splits between fetch round trips and partition batches)")
    parser.add_argument("--record-size", type=int, default=1000)
    parser.add_argument("--source-linger-ms", type=float, default=5.0,
                        help="linger.ms of the writer on A (5, librdkafka's default; 0 makes every record its own "
                             "batch and, from about 10 MB/s here, a backlog in the writer itself)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every engine this many times, in turn (engine 1, 2, ..., then again), on the same "
                             "clusters; a summary gives the medians over the rounds and compares each run with its "
                             "own round's MM2 run (one sitting on a shared machine moves p99 by tens of per cent)")
    parser.add_argument("--rotate", action="store_true",
                        help="start each round one engine further along the list (round 2 runs engine 2, 3, ..., 1), "
                             "so no engine always runs right after the same one: a run inherits the brokers' "
                             "write-back of the run before it")
    parser.add_argument("--python", action="append", default=[], metavar="NAME=PATH",
                        help="an interpreter (of a venv with mirrorline installed) for engines written ENGINE@NAME, "
                             "e.g. --python py313=../py313/.venv/bin/python --engines mirrorline,mirrorline@py313")
    parser.add_argument("--repeats", type=int, default=2, help="extra attempts for a run taken above --max-load")
    parser.add_argument("--max-load", type=float, default=DEFAULT_MAX_LOAD)
    parser.add_argument("--allow-load", action="store_true", help="measure even above --max-load (flagged)")
    parser.add_argument("--out", type=Path, default=Path("bench-latency-out"))
    parser.add_argument("--count-calls", type=float, default=0.0, metavar="SECONDS",
                        help="count each mirrorline engine's Python calls (cProfile) for SECONDS from --settle on, with "
                             "the fetches, produce requests and batches they served; with two engines whose batches "
                             "per fetch differ, solve for the calls a batch and a round trip cost (call_count.py). "
                             "The counted runs' latency and CPU are not comparable with uncounted ones")
    parser.add_argument("--keep-logs", action="store_true",
                        help="copy each engine's log into --out and write a per-second latency timeline (CSV)")
    args = parser.parse_args(argv)
    PARTITIONS = args.partitions
    engines = [e for e in args.engines.split(",") if e]
    try:
        args.interpreters = parse_interpreters(args.python)
    except ValueError as exc:
        parser.error(str(exc))
    unknown = [e for e in engines if split_engine(e)[0] not in ENGINES]
    if unknown:
        parser.error(f"unknown engine: {', '.join(unknown)}")
    unnamed = [e for e in engines if split_engine(e)[1] is not None and split_engine(e)[1] not in args.interpreters]
    if unnamed:
        parser.error(f"no --python NAME=PATH for engine {', '.join(unnamed)}")
    if any(split_engine(e)[0] == "mm2" and split_engine(e)[1] is not None for e in engines):
        parser.error("mm2 runs on Java: ENGINE@NAME is for mirrorline engines only")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, not {args.rounds}")
    rates = [float(r) for r in args.rates.split(",") if r]
    if not 0 <= args.settle < args.seconds:
        parser.error(f"--settle ({args.settle:g}) must be at least 0 and less than --seconds ({args.seconds:g})")
    if args.count_calls < 0 or (args.count_calls and args.settle + args.count_calls > args.seconds):
        parser.error(f"--count-calls ({args.count_calls:g}) must fit between --settle ({args.settle:g}) and the "
                     f"end of the run (--seconds {args.seconds:g})")
    refuse_if_loaded(args.max_load, args.allow_load)
    stop_cleanly_on_sigterm()
    args.out.mkdir(parents=True, exist_ok=True)

    tmp = Path(tempfile.mkdtemp(prefix="mirrorline-bench-latency-"))
    manager = LocalKafka(tmp / "kafka", _base_port())
    runs: list[LatencyRun] = []
    try:
        log(f"Apache Kafka {KAFKA_VERSION}; {load_banner(args.max_load)}; state under {tmp}")
        for name, path in {"this benchmark's": sys.executable, **args.interpreters}.items():
            log(f"mirrorline on {name} Python: {interpreter_banner(path)}")
        resolve_kafka_classpath()
        if "mm2" in engines:
            resolve_mm2_classpath()
        clusters = manager.start(["A", "B"])
        a, b = (c.spec.bootstrap_servers for c in clusters)
        count = 0
        for rate, round_, engine in ((rate, round_, engine) for rate in rates
                                     for round_ in range(1, args.rounds + 1)
                                     for engine in round_order(engines, round_, args.rotate)):
            for attempt in range(1, args.repeats + 2):
                count += 1
                log(f"[{rate:g} MB/s] {engine}, round {round_} of {args.rounds}, attempt {attempt}; "
                    f"{load_banner(args.max_load)}")
                run = measure(engine, f"L{count}", a, b, rate, args, tmp, attempt, round_)
                runs.append(run)
                if args.keep_logs:
                    log(f"    timeline: {write_timeline(run, args.out)}")
                log(f"    p50 {run.p50_ms:.1f} ms, p99 {run.p99_ms:.1f} ms, p99.9 {run.p999_ms:.1f} ms "
                    f"(after {args.settle:g} s); p99 over the whole run {run.p99_all_ms:.1f} ms, caught up "
                    f"after {run.catch_up_s} s; "
                    f"on A alone p50 {run.source_p50_ms or 0:.1f} / p99 {run.source_p99_ms or 0:.1f} ms; "
                    f"{run.cpu_s:.1f} CPU s ({run.steady_cpu_per_min or 0:.1f} per minute once settled), "
                    f"peak load {run.load_peak:.1f}")
                if run.calls is not None:
                    log(f"    {describe_calls(run.calls)} (under cProfile: this run's "
                        f"latency and CPU are not comparable with uncounted runs)")
                if not run.flagged:
                    break
    finally:
        manager.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        (args.out / "latency-results.json").write_text(json.dumps(
            [{k: v for k, v in asdict(r).items() if k not in ("samples", "timeline")} for r in runs], indent=2))

    log("")
    log(f"=== end-to-end latency at fixed rates, {args.record_size} B records, {PARTITIONS} partitions, "
        f"{args.seconds:g} s per run, tasks.max={args.tasks}, writer linger.ms={args.source_linger_ms:g} "
        f"(Kafka {KAFKA_VERSION}) ===")
    log(load_banner(args.max_load))
    print_table(runs)
    print_round_summary(runs)
    print_call_counts(runs)
    for path in plot(runs, args.out):
        log(f"plot: {path}")
    if any(r.flagged for r in runs):
        log(f"some runs stayed above load {args.max_load} after {args.repeats} repeats: re-run on a quiet machine")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
