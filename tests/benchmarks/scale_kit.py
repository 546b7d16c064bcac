"""Shared pieces of the scale and latency benchmarks (``bench_scale.py``, ``bench_latency.py``).

Not a benchmark itself (pytest never collects it: no ``test_`` name). It holds what both need:
the load-average guard, process measurements (CPU, RSS, TCP connections per cluster), many-topic
set-up with confluent-kafka's AdminClient, and launching mirrorline or Java MM2 on one
``mm2.properties``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
for _path in (REPO_ROOT / "tests", Path(__file__).resolve().parent):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # noqa: E402

from bench_mirror import (  # noqa: E402
    log, proc_children, proc_cpu_seconds, proc_cpu_split, proc_peak_rss_kb, proc_rss_kb,
)
from mirrorline.localkafka.artifacts import java_executable, resolve_mm2_classpath  # noqa: E402

#: bin/connect-mirror-maker.sh's heap.
MM2_HEAP = ["-Xms256M", "-Xmx2G"]
#: A run whose 1-minute load average exceeds this is flagged (and repeated where the script can).
DEFAULT_MAX_LOAD = 1.5


# -- the machine ---------------------------------------------------------------------------

@dataclass
class LoadWatch:
    """The 1-minute load average sampled during a measurement: its largest value flags a noisy run."""

    samples: list[float] = field(default_factory=list)

    def sample(self) -> float:
        value = os.getloadavg()[0]
        self.samples.append(value)
        return value

    @property
    def peak(self) -> float:
        return max(self.samples) if self.samples else os.getloadavg()[0]


def load_banner(max_load: float) -> str:
    """One line: cores and load averages now, and whether they are over the threshold."""
    one, five, fifteen = os.getloadavg()
    flag = "" if one <= max_load else f"  <-- ABOVE {max_load}: figures taken now are not trustworthy"
    return f"cores: {os.cpu_count()}; load average 1/5/15 min: {one:.2f} / {five:.2f} / {fifteen:.2f}{flag}"


def stop_cleanly_on_sigterm() -> None:
    """SIGTERM raises SystemExit, so ``finally`` blocks stop the clusters and engines a run started."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def refuse_if_loaded(max_load: float, allow: bool) -> None:
    """Exit when the machine is busier than ``max_load``, unless the caller allows it (smoke runs)."""
    one = os.getloadavg()[0]
    if one > max_load and not allow:
        log(load_banner(max_load))
        log(f"refusing to measure at a load average of {one:.2f} (> --max-load {max_load}); wait for a quiet "
            f"machine, or pass --allow-load for a smoke run whose figures are flagged")
        sys.exit(2)


# -- the page cache ------------------------------------------------------------------------

#: Linux's own default block-device read-ahead, KiB
LINUX_READ_AHEAD_KB = 128
#: Kafka's default ``segment.index.bytes``: each partition's offset index is preallocated and mapped at this size
KAFKA_INDEX_BYTES = 10 * 1024 * 1024


def read_ahead_path(path: Path) -> Path | None:
    """The sysfs file holding the read-ahead (KiB) of the block device under ``path``; None if not found."""
    device = os.stat(path).st_dev
    base = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}")
    # a whole disk has its own queue; a partition's is its disk's (the parent directory in sysfs)
    for candidate in (base / "queue" / "read_ahead_kb", base.resolve().parent / "queue" / "read_ahead_kb",
                      Path(f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb")):
        if candidate.is_file():
            return candidate
    return None


def read_ahead_note(path: Path, partitions: int) -> str:
    """One line on the read-ahead under ``path`` and what it means for the brokers' index files.

    A Kafka broker maps each partition's offset index (``segment.index.bytes``, 10 MiB, a sparse
    file) into memory, and the first touch of a page of it (an append, a fetch's offset lookup)
    faults in up to the device's read-ahead around it. Linux's default of 128 KiB keeps that small;
    a device set to several MiB (this project's VM: 8 MiB) fills up to that much page cache per
    partition with the index's zeros. Past the machine's memory the kernel reclaims and faults
    them in again over and over (measured here on 2026-11-30: 2-3 GiB/s of page cache reclaimed,
    65-80 % system CPU, and a source broker taking 19-35 s per fetch over 4,000 partitions).
    """
    found = read_ahead_path(path)
    if found is None:
        return "block-device read-ahead: unknown"
    kb = int(found.read_text().strip())
    line = f"block-device read-ahead: {kb} KiB ({found})"
    if kb > LINUX_READ_AHEAD_KB:
        index_gib = partitions * min(kb * 1024, KAFKA_INDEX_BYTES) / 2 ** 30
        line += (f"  <-- above Linux's default of {LINUX_READ_AHEAD_KB}: each broker's offset indexes may fill up to "
                 f"{index_gib:.0f} GiB of page cache at {partitions:,} partitions (expect reclaim, system CPU and slow "
                 f"fetches once that passes memory; --read-ahead-kb {LINUX_READ_AHEAD_KB} sets the default for the run)")
    return line


def set_read_ahead(path: Path, kb: int) -> tuple[Path, int]:
    """Set the read-ahead of the device under ``path`` to ``kb`` KiB; returns (its sysfs file, the value before)
    so the caller can restore it. Raises SystemExit with one readable line when it cannot."""
    found = read_ahead_path(path)
    if found is None:
        sys.exit(f"--read-ahead-kb: no read_ahead_kb found in sysfs for the device under {path}")
    before = int(found.read_text().strip())
    try:
        found.write_text(str(kb))
    except OSError as exc:
        sys.exit(f"--read-ahead-kb: cannot write {found} ({exc.strerror}); it needs root, or leave the option out")
    return found, before


class ReclaimWatch:
    """Page cache the kernel reclaimed (kswapd and direct reclaim) since this was made, from /proc/vmstat."""

    def __init__(self) -> None:
        self._start = self._stolen()

    @staticmethod
    def _stolen() -> int:
        pages = 0
        with open("/proc/vmstat") as stats:
            for line in stats:
                name, value = line.split()
                if name in ("pgsteal_kswapd", "pgsteal_direct"):
                    pages += int(value)
        return pages

    def mib(self) -> float:
        """MiB reclaimed since this watch was made."""
        return (self._stolen() - self._start) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


# -- processes -----------------------------------------------------------------------------

def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in os.scandir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(fd.path)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        pass
    return inodes


def tcp_connections(pids: list[int], ports: dict[str, int]) -> dict[str, int]:
    """Established TCP connections of ``pids`` to each named port (``{"A": 9092, ...}``), from /proc/net/tcp*."""
    inodes = set().union(*(_socket_inodes(p) for p in pids)) if pids else set()
    counts = {name: 0 for name in ports}
    by_port = {port: name for name, port in ports.items()}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "01" or fields[9] not in inodes:  # 01 = ESTABLISHED
                continue
            port = int(fields[2].rsplit(":", 1)[1], 16)
            if port in by_port:
                counts[by_port[port]] += 1
    return counts


class Engine:
    """One engine process (mirrorline or Java MM2) on a properties file; CPU and RSS include its children."""

    def __init__(self, command: list[str], log_path: Path, env: dict[str, str] | None = None, name: str = ""):
        self.name, self.log_path = name, log_path
        with open(log_path, "w") as out:
            self.proc = subprocess.Popen(command, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, **(env or {})})
        self._peak_kb = 0

    def pids(self) -> list[int]:
        try:
            return [self.proc.pid, *proc_children(self.proc.pid)]
        except OSError:
            return [self.proc.pid]

    def cpu_s(self) -> float:
        total = 0.0
        for pid in self.pids():
            try:
                total += proc_cpu_seconds(pid)
            except OSError:
                pass
        return total

    def cpu_split(self) -> tuple[float, float]:
        """(user, system) CPU seconds of the engine's processes so far: system time is the kernel's work
        for the process (page faults after the heap trimmer gave pages back, socket calls)."""
        user = system = 0.0
        for pid in self.pids():
            try:
                process_user, process_system = proc_cpu_split(pid)
            except OSError:
                continue
            user += process_user
            system += process_system
        return user, system

    def peak_rss_kb(self) -> int:
        """The largest of VmHWM summed over the processes, and every RSS sum sampled so far."""
        total = 0
        for pid in self.pids():
            try:
                total += proc_peak_rss_kb(pid)
            except (OSError, RuntimeError):
                pass
        self._peak_kb = max(self._peak_kb, total)
        return self._peak_kb

    def rss_kb(self) -> int:
        return sum(proc_rss_kb(p) for p in self.pids())

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def engine_command(engine: str, props: Path, listeners: str | None = None) -> list[str]:
    """How to launch an engine in MM2 dedicated mode on a properties file."""
    if engine == "mm2":
        return [java_executable(), *MM2_HEAP, "-cp", f"{resolve_mm2_classpath()}/*",
                "org.apache.kafka.connect.mirror.MirrorMaker", str(props)]
    return [sys.executable, "-m", "mirrorline.cli.main", "mm2", str(props),
            *(["--listeners", listeners] if listeners else [])]


def mirrorline_env(pythonpath: str | None) -> dict[str, str]:
    """Environment that runs another build of mirrorline (a directory laid out as the ``mirrorline``
    package, see the README), for before/after comparisons in one sitting; empty for this worktree."""
    return {"PYTHONPATH": pythonpath} if pythonpath else {}


# -- many topics ---------------------------------------------------------------------------

def create_topics(bootstrap: str, names: list[str], partitions: int, chunk: int = 200) -> None:
    """Create topics (broker-default configs, replication factor 1) in batches; existing ones are fine."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for start in range(0, len(names), chunk):
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names[start:start + chunk]],
                                      request_timeout=120)
        for name, future in futures.items():
            try:
                future.result()
            except Exception as exc:  # noqa: BLE001
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise RuntimeError(f"creating {name}: {exc}") from exc


def delete_topics_with_prefix(bootstrap: str, prefix: str, chunk: int = 200) -> int:
    """Delete every topic whose name starts with ``prefix``; returns how many were asked to go."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = sorted(t for t in admin.list_topics(timeout=60).topics if t.startswith(prefix))
    for start in range(0, len(names), chunk):
        for name, future in admin.delete_topics(names[start:start + chunk], request_timeout=120).items():
            try:
                future.result()
            except Exception as exc:  # noqa: BLE001
                if "UNKNOWN_TOPIC" not in str(exc):
                    raise RuntimeError(f"deleting {name}: {exc}") from exc
    return len(names)


def end_offsets(bootstrap: str, partitions: list[tuple[str, int]], chunk: int = 5000) -> dict[tuple[str, int], int]:
    """End offsets of many partitions with ListOffsets; a partition that does not exist (yet) is left out."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: dict[tuple[str, int], int] = {}
    for start in range(0, len(partitions), chunk):
        request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions[start:start + chunk]}
        try:
            futures = admin.list_offsets(request, request_timeout=30)
        except Exception:  # noqa: BLE001 - e.g. every topic of the chunk unknown
            continue
        for tp, future in futures.items():
            try:
                out[(tp.topic, tp.partition)] = future.result().offset
            except Exception:  # noqa: BLE001 - unknown topic or partition (not created yet)
                pass
    return out


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The value at ``fraction`` (nearest rank) of an already sorted list."""
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, int(round(fraction * len(sorted_values))) - 1))
    return sorted_values[index]


def wait_until(predicate, timeout: float, interval: float = 0.5, engine: Engine | None = None, what: str = ""):
    """Call ``predicate`` until it returns a true value; returns it. TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        if engine is not None:
            engine.check_alive()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what or predicate} not reached within {timeout:.0f} s")
        time.sleep(interval)
