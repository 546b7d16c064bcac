"""The README's main job: local clusters A and B, shown answering.

Starts (or reuses) two real Apache Kafka clusters, writes a few records to each and reads
them back with their cluster ids. Later issues grow this into a live A->B mirror.
"""

from __future__ import annotations

import asyncio
import sys
import time

from aiokafka.admin import AIOKafkaAdminClient

from framework.localkafka import LocalKafka, LocalKafkaError
from framework.testing.kafka import create_topic, produce, read_all


async def show(name: str, bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        info = await admin.describe_cluster()
        topics = await admin.list_topics()
    finally:
        await admin.close()
    topic = "demo.hello"
    if topic not in topics:
        await create_topic(bootstrap, topic, 3)
    stamp = int(time.time() * 1000)
    await produce(bootstrap, topic, [(i % 3, f"k{i}".encode(), f"hello from {name} #{i}".encode(),
                                      [("demo", b"1")], stamp) for i in range(3)])
    records = await read_all(bootstrap, topic)
    total = sum(len(r) for r in records.values())
    print(f"cluster {name} at {bootstrap}: cluster.id={info['cluster_id']}, "
          f"{len(info['brokers'])} broker(s), topic {topic} holds {total} records; latest:")
    latest = sorted((r for rs in records.values() for r in rs), key=lambda r: r.timestamp)[-3:]
    for record in latest:
        print(f"  partition {record.partition} offset {record.offset}: {record.key.decode()} = {record.value.decode()}")


def main() -> int:
    print("starting local Apache Kafka clusters A and B (first run downloads Kafka from Maven Central)...")
    try:
        clusters = LocalKafka().start(["A", "B"])
    except LocalKafkaError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 1
    for cluster in clusters:
        asyncio.run(show(cluster.spec.name, cluster.spec.bootstrap_servers))
    print("clusters keep running; stop them with: .venv/bin/mirrorline local-kafka stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
