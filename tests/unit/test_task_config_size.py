"""MirrorSource task configs at tens of thousands of partitions fit in the config topic's records.

The config topic keeps each task config in one record (``task-<name>-<n>``, Connect's JSON) and
the broker's default ``max.message.bytes`` is 1048588 bytes. MM2 lists every partition in
``task.assigned.partitions``; at 50,000 partitions with realistic topic names that list alone is
over 2 MB. These tests build the task configs a MirrorSource connector hands to the runtime for
50,000 partition names, encode them as the config store writes them, and check their size and
that the tasks read back exactly the partitions they were dealt.
"""

from __future__ import annotations

import json

import pytest

from mirrorline.connectors.source_mirror.config import TASK_ASSIGNED_PARTITIONS
from mirrorline.connectors.source_mirror.connector import MirrorSourceConnector
from mirrorline.connectors.source_mirror.topics import (
    COMPRESSED_PREFIX,
    MAX_PARTITIONS_PER_TASK,
    format_assigned,
    overload_warning,
    parse_assigned,
    task_partitions,
)
from mirrorline.storage.kafka_configs import TASK_PREFIX, _encode
from mirrorline.testing.plugin_kit import FakeConnectorContext

#: The broker's default max.message.bytes (1 MiB + 12), which bounds one record batch.
DEFAULT_MAX_MESSAGE_BYTES = 1048588
#: What a one-record batch adds to a record's key and value (batch header, record framing): < 100 bytes.
BATCH_OVERHEAD = 100


def realistic_topics(topics: int, partitions: int) -> dict[str, int]:
    """Topic names as a company's DR flow has them: domain.team.entity-events.vN, ~40 characters."""
    domains = ["payments", "orders", "inventory", "customers", "shipping", "billing", "fraud", "catalog"]
    return {f"prod.{domains[i % 8]}.team{i % 97:02d}.entity{i:05d}-events.v{1 + i % 3}": partitions
            for i in range(topics)}


def connector_for(topics: dict[str, int], warnings: list[str] | None = None) -> MirrorSourceConnector:
    connector = MirrorSourceConnector()
    context = FakeConnectorContext("big")
    if warnings is not None:
        context.report_warning = lambda message, key=None: warnings.append(message)
    connector.initialize(context)
    connector.config = MirrorSourceConnector.config_def.parse({
        "source.cluster.alias": "A", "target.cluster.alias": "B",
        "source.cluster.bootstrap.servers": "a:9092", "target.cluster.bootstrap.servers": "b:9092",
        "topics": "prod\\..*"})
    connector.topics = topics
    return connector


def record_bytes(connector: str, index: int, config: dict[str, str]) -> int:
    """The size of the config-topic record KafkaConfigStore.put_task_configs writes for one task."""
    key = f"{TASK_PREFIX}{connector}-{index}".encode()
    return len(key) + len(_encode({"properties": config})) + BATCH_OVERHEAD


def mm2_list(partitions: list[tuple[str, int]]) -> str:
    return ",".join(f"{t}-{p}" for t, p in partitions)


@pytest.mark.parametrize("topics, partitions", [(12_500, 4), (50_000, 1), (1_000, 50)])
@pytest.mark.parametrize("tasks_max", [1, 13])
async def test_task_configs_at_50000_partitions_fit_a_default_config_record(topics, partitions, tasks_max):
    dealt = realistic_topics(topics, partitions)
    everything = task_partitions(dealt)
    assert len(everything) == 50_000
    connector = connector_for(dealt)
    configs = await connector.task_configs(tasks_max)
    assert len(configs) == tasks_max
    sizes = [record_bytes("big", i, c) for i, c in enumerate(configs)]
    assert max(sizes) < DEFAULT_MAX_MESSAGE_BYTES, sizes
    # every partition read back by exactly one task, as dealt (round-robin)
    read = [parse_assigned(c[TASK_ASSIGNED_PARTITIONS]) for c in configs]
    assert sorted(p for task in read for p in task) == sorted(everything)
    for i, task in enumerate(read):
        assert sorted(task) == sorted(everything[i::tasks_max])
    if tasks_max == 1:  # MM2's list would not fit: the compact form is what makes it fit
        assert len(mm2_list(everything)) > DEFAULT_MAX_MESSAGE_BYTES


def test_compact_form_keeps_small_assignments_readable():
    assert format_assigned([("orders", 0), ("orders", 1), ("orders", 2), ("orders", 3)]) == "orders-0..3"
    assert format_assigned([("a", 1), ("a", 4), ("a", 7), ("b-2", 0), ("b-2", 5)]) == "a-1..7/3,b-2-0,b-2-5"
    assert format_assigned([("x", 9)]) == "x-9"
    assert format_assigned([]) == ""


def test_parse_reads_mm2_lists_ranges_and_compressed_text():
    assert parse_assigned("orders-0,my-topic-2,orders-1") == [("orders", 0), ("my-topic", 2), ("orders", 1)]
    assert parse_assigned("t-0..2,u-1..7/3") == [("t", 0), ("t", 1), ("t", 2), ("u", 1), ("u", 4), ("u", 7)]
    assert parse_assigned("") == []
    big = [(f"topic-with-a-long-name-{i:06d}", 0) for i in range(20_000)]
    text = format_assigned(big)
    assert text.startswith(COMPRESSED_PREFIX)
    assert sorted(parse_assigned(text)) == sorted(big)


@pytest.mark.parametrize("text", ["orders", "orders-x", "orders-1..y", "-3"])
def test_parse_names_a_bad_entry(text):
    with pytest.raises(ValueError, match="task.assigned.partitions"):
        parse_assigned(text)


async def test_more_partitions_than_tasks_can_hold_warn_naming_tasks_max():
    warnings: list[str] = []
    topics = {f"t{i:04d}": 4 for i in range(2 * MAX_PARTITIONS_PER_TASK // 4 + 1)}  # 2 x the bound + 4
    connector = connector_for(topics, warnings)
    await connector.task_configs(2)
    assert len(warnings) == 1
    assert "tasks.max to at least 3" in warnings[0] and str(MAX_PARTITIONS_PER_TASK) in warnings[0]
    await connector.task_configs(2)  # the same condition is not reported again
    assert len(warnings) == 1
    await connector.task_configs(3)
    assert len(warnings) == 1
    assert overload_warning(MAX_PARTITIONS_PER_TASK, 1) is None
    assert "tasks.max" in overload_warning(MAX_PARTITIONS_PER_TASK + 1, 1)
