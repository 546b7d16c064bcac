"""CPU of an offsets flush at thousands of source partitions: what the worker pays every
``offset.flush.interval.ms`` while a mirror of that many partitions copies, and once after an
initial copy (the first flush of each key also hashes it and encodes its JSON key).

Starts one fresh local cluster (temporary state, free ports) and, for each build, a child process
that starts a ``KafkaOffsetStore`` (25 partitions, as Connect's offsets topic) and puts the offsets
of ``--partitions`` MM2 source partitions ``--rounds`` times, each followed by reading the topic to
its end (the worker's tail reads its own writes back). Prints the CPU and wall time of each round.

    .venv/bin/python tests/benchmarks/bench_offsets_flush.py                       # 8,000 partitions
    .venv/bin/python tests/benchmarks/bench_offsets_flush.py --partitions 50000 --rounds 3
    .venv/bin/python tests/benchmarks/bench_offsets_flush.py --before-pythonpath /tmp/ml-before/pkg

``--before-pythonpath`` runs another build (laid out as the ``mirrorline`` package, see the
README) in the same sitting, alternating with this one ``--repeats`` times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from mirrorline.localkafka.manager import LocalKafka  # noqa: E402
from mirrorline.testing.fixtures import _free_base_port  # noqa: E402

#: what the child runs: one store, the rounds, one JSON line of [(cpu_s, wall_s), ...]
CHILD = r"""
import asyncio, json, sys, time, uuid
from mirrorline.storage.kafka_offsets import KafkaOffsetStore

async def main(bootstrap, count, rounds):
    store = KafkaOffsetStore(f"flush-bench-{uuid.uuid4().hex[:8]}", {"bootstrap.servers": bootstrap},
                             partitions=25, replication_factor=1)
    await store.start()
    parts = [{"cluster": "A", "partition": p % 4, "topic": f"bench-topic-{p // 4:05d}"} for p in range(count)]
    out = []
    try:
        for round_number in range(rounds):
            offsets = [(p, {"offset": 1000 * round_number + i % 997}) for i, p in enumerate(parts)]
            cpu, wall = time.process_time(), time.perf_counter()
            await store.put("MirrorSourceConnector", offsets)
            await store.log.read_to_end()
            out.append((time.process_time() - cpu, time.perf_counter() - wall))
        got = await store.get("MirrorSourceConnector", parts[-3:])
        assert got == [o for _, o in offsets[-3:]], got
    finally:
        await store.stop()
    print(json.dumps(out))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def measure(bootstrap: str, partitions: int, rounds: int, pythonpath: str | None) -> list[tuple[float, float]]:
    """One child's rounds: [(CPU s, wall s), ...]."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run([sys.executable, "-c", CHILD, bootstrap, str(partitions), str(rounds)], env=env,
                          capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"bench_offsets_flush: the measuring process failed:\n{done.stderr[-2000:]}")
    return [tuple(pair) for pair in json.loads(done.stdout.strip().splitlines()[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=8000, help="source partitions per flush")
    parser.add_argument("--rounds", type=int, default=4, help="flushes per process (the first one is the first)")
    parser.add_argument("--repeats", type=int, default=3, help="processes per build")
    parser.add_argument("--before-pythonpath", default=None, help="another build to measure in the same sitting")
    args = parser.parse_args()
    if args.partitions < 1 or args.rounds < 2 or args.repeats < 1:
        parser.error("--partitions >= 1, --rounds >= 2 and --repeats >= 1")

    tmp = Path(tempfile.mkdtemp(prefix="mirrorline-bench-flush-"))
    manager = LocalKafka(tmp / "kafka", _free_base_port(1))
    builds = [("this build", None)] + ([("before", args.before_pythonpath)] if args.before_pythonpath else [])
    results: dict[str, list[list[tuple[float, float]]]] = {name: [] for name, _ in builds}
    try:
        [cluster] = manager.start(["F"])
        bootstrap = cluster.spec.bootstrap_servers
        print(f"{args.partitions:,} offsets per flush, {args.rounds} flushes per process, {args.repeats} "
              f"process(es) per build; cluster {bootstrap}", flush=True)
        for _ in range(args.repeats):
            for name, pythonpath in builds:
                results[name].append(measure(bootstrap, args.partitions, args.rounds, pythonpath))
    finally:
        manager.stop()
    print()
    print(f"{'build':<12} {'first flush CPU ms':>19} {'later flushes CPU ms':>21} {'first wall ms':>14} "
          f"{'later wall ms':>14}")
    for name, runs in results.items():
        first = [run[0] for run in runs]
        later = [pair for run in runs for pair in run[1:]]
        print(f"{name:<12} {statistics.median(c for c, _ in first) * 1000:>19.0f} "
              f"{statistics.median(c for c, _ in later) * 1000:>21.0f} "
              f"{statistics.median(w for _, w in first) * 1000:>14.0f} "
              f"{statistics.median(w for _, w in later) * 1000:>14.0f}")
    print("(medians; CPU is the measuring process's, which writes the offsets and reads them back)")


if __name__ == "__main__":
    main()
