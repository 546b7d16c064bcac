"""MirrorSourceConnector against real clusters A and B."""

from __future__ import annotations

import random

import pytest

from support.kafka import KEEP_OLD_RECORDS, produce, read_all, record_tuples, topic_config
from support.worker import Rest, all_running, metric_value, running_standalone

pytestmark = pytest.mark.integration


def keyed_records(partitions: int, count: int, seed: int):
    rng = random.Random(seed)
    base = 1_700_000_000_000
    out = []
    for i in range(count):
        partition = i % partitions
        key = None if i % 97 == 0 else f"key-{rng.randrange(1000)}".encode()
        value = None if i % 89 == 0 else f"value-{i}-{rng.random()}".encode()
        headers = [("seq", str(i).encode()), ("h", bytes([i % 256]))] + ([("h", b"dup")] if i % 5 == 0 else [])
        out.append((partition, key, value, headers, base + i))
    return out


@pytest.mark.parametrize("path", ["batches", "merged", "records"])
async def test_topics_are_mirrored_partition_by_partition_exactly(cluster_a, cluster_b, make_topic, flow_config,
                                                                  tmp_path, unique_name, path):
    """Every copy path keeps partition, order, key, value, headers (order, duplicates, nulls) and timestamps:
    batches forwarded whole, small batches merged (the default), and record by record."""
    # the records carry fixed 2023 timestamps, which the default 7-day retention would delete
    topics = [await make_topic(cluster_a, partitions=6, prefix="orders", config=KEEP_OLD_RECORDS)
              for _ in range(3)]
    sent = {}
    for n, topic in enumerate(topics):
        sent[topic] = keyed_records(6, 10_000, seed=n)
        await produce(cluster_a.bootstrap_servers, topic, sent[topic])
    source_alias = unique_name("A")  # the copy-path counters are per flow
    settings = {"batches": {"batch.forwarding.coalesce.bytes": "0"}, "merged": {},
                "records": {"batch.forwarding.enabled": "false"}}[path]
    # no heartbeats topic copied alongside (other tests leave one on A): copied_records is per flow, and
    # must count exactly these 30,000 records
    config = flow_config(topics=",".join(topics), tasks_max=3, source_alias=source_alias,
                         **{"heartbeats.replication.enabled": "false"}, **settings)
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    name = unique_name("mirror")
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(3))
        for topic in topics:
            mirrored = await read_all(cluster_b.bootstrap_servers, f"{source_alias}.{topic}", expect=10_000,
                                      timeout=120)
            assert sorted(mirrored) == list(range(6))
            for partition in range(6):
                expected = [(k, v, h, ts) for p, k, v, h, ts in sent[topic] if p == partition]
                assert record_tuples(mirrored[partition]) == expected, f"{topic} partition {partition}"
            # the remote topic copies the source's retention, so the old records are safe there too
            assert await topic_config(cluster_b.bootstrap_servers, f"{source_alias}.{topic}", "retention.ms") == "-1"
        status, metrics_text = await rest.call("GET", "/metrics")
        assert f'kafka_connect_mirror_source_connector_record_count_total{{partition="0",source="{source_alias}",' \
               f'target="B",topic="{source_alias}.{topics[0]}"}}' in metrics_text
        copied = {path: metric_value(metrics_text, "kafka_connect_mirror_source_connector_copied_records_total",
                                     source=source_alias, target="B", path=path)
                  for path in ("batch", "rebuilt", "record")}
        if path == "batches":  # every record went through the fast path: no fallback, nothing rebuilt
            assert copied == {"batch": 30_000, "rebuilt": 0, "record": 0}
        elif path == "merged":  # the test producer's small batches were merged; nothing fell back to records
            assert copied["rebuilt"] > 0 and copied["batch"] + copied["rebuilt"] == 30_000 and copied["record"] == 0
        else:
            assert copied == {"batch": 0, "rebuilt": 0, "record": 30_000}
