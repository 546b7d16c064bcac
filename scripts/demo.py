"""The README's main job: a live MirrorMaker 2 flow between two local Apache Kafka clusters.

1. Starts (or reuses) local clusters A and B (real Apache Kafka, KRaft).
2. Writes an ordinary MM2 ``mm2.properties`` (flow A->B for topics ``demo.*``) and runs
   ``mirrorline mm2`` on it, exactly as an MM2 user would run ``connect-mirror-maker.sh``.
3. Produces a few orders to ``demo.orders`` on A every second and shows them arriving in
   ``A.demo.orders`` on B, with their end-to-end latency.

``--seconds N`` (default 20; 0 runs until Ctrl-C). The clusters keep running afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from mirrorline.localkafka import LocalKafka, LocalKafkaError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support: Kafka helpers
from support.kafka import create_topic, partitions_of, produce, topics_of  # noqa: E402

TOPIC = "demo.orders"
REMOTE = f"A.{TOPIC}"
STATE = Path(os.path.expanduser("~/.local/state/mirrorline/demo"))

MM2_PROPERTIES = """\
# A MirrorMaker 2 config in MM2's own format: mirrorline runs it unchanged.
clusters = A, B
A.bootstrap.servers = {a}
B.bootstrap.servers = {b}
A->B.enabled = true
A->B.topics = demo\\\\..*
{SINGLE_BROKER_MM2_PROPERTIES}offset.storage.partitions = 3
status.storage.partitions = 1
refresh.topics.interval.seconds = 5
B.offset.flush.interval.ms = 1000
"""


async def ensure_topic(bootstrap: str) -> None:
    if TOPIC not in await topics_of(bootstrap):
        await create_topic(bootstrap, TOPIC, 3)


async def wait_for_remote_topic(bootstrap: str, mm2: subprocess.Popen, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if mm2.poll() is not None:
            raise RuntimeError(f"mirrorline mm2 exited with code {mm2.returncode}; see {STATE / 'mm2.log'}")
        partitions = await partitions_of(bootstrap, REMOTE)
        if partitions:
            return partitions
        await asyncio.sleep(0.5)
    raise RuntimeError(f"{REMOTE} did not appear on B within {timeout:.0f}s; see {STATE / 'mm2.log'}")


async def live(a: str, b: str, mm2: subprocess.Popen, seconds: int) -> None:
    partitions = await wait_for_remote_topic(b, mm2)
    consumer = AIOKafkaConsumer(bootstrap_servers=b, enable_auto_commit=False)
    await consumer.start()
    tps = [TopicPartition(REMOTE, p) for p in partitions]
    consumer.assign(tps)
    await consumer.seek_to_end(*tps)
    produced = received = 0
    latencies: list[float] = []
    started = time.monotonic()
    try:
        tick = 0
        while seconds == 0 or tick < seconds:
            tick += 1
            now = int(time.time() * 1000)
            batch = [(i % 3, f"order-{tick}-{i}".encode(), f'{{"tick": {tick}, "item": {i}}}'.encode(),
                      [("source", b"demo")], now) for i in range(5)]
            await produce(a, TOPIC, batch)
            produced += len(batch)
            newest = None
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                fetched = await consumer.getmany(timeout_ms=200)
                for records in fetched.values():
                    for record in records:
                        received += 1
                        latencies.append(time.time() * 1000 - record.timestamp)
                        newest = record
            line = f"[{time.monotonic() - started:5.1f}s] produced {produced:4d} to A/{TOPIC}, " \
                   f"mirrored {received:4d} to B/{REMOTE}"
            if newest is not None:
                line += f"  newest: {newest.key.decode()} p{newest.partition} ({latencies[-1]:.0f} ms after produce)"
            print(line, flush=True)
    finally:
        await consumer.stop()
    if latencies:
        ordered = sorted(latencies)
        print(f"mirrored {received} of {produced} records; latency median {ordered[len(ordered) // 2]:.0f} ms, "
              f"max {ordered[-1]:.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=20, help="how long to produce (0: until Ctrl-C)")
    args = parser.parse_args()
    print("starting local Apache Kafka clusters A and B (the first run downloads Kafka from Maven Central)...")
    try:
        clusters = {c.spec.name: c.spec.bootstrap_servers for c in LocalKafka().start(["A", "B"])}
    except LocalKafkaError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 1
    a, b = clusters["A"], clusters["B"]
    print(f"cluster A: {a}   cluster B: {b}")
    asyncio.run(ensure_topic(a))
    STATE.mkdir(parents=True, exist_ok=True)
    properties = STATE / "mm2.properties"
    properties.write_text(MM2_PROPERTIES.format(a=a, b=b, SINGLE_BROKER_MM2_PROPERTIES=SINGLE_BROKER_MM2_PROPERTIES))
    print(f"running: mirrorline mm2 {properties}   (log: {STATE / 'mm2.log'})")
    with open(STATE / "mm2.log", "ab") as log:
        mm2 = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(properties)],
                               stdout=log, stderr=log)
    try:
        asyncio.run(live(a, b, mm2, args.seconds))
    except KeyboardInterrupt:
        pass
    except RuntimeError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 1
    finally:
        if mm2.poll() is None:
            mm2.send_signal(signal.SIGTERM)
            mm2.wait(60)
    print(f"mirrorline mm2 stopped (exit code {mm2.returncode}); clusters keep running: "
          f".venv/bin/mirrorline local-kafka stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
