"""``replication.metrics.level=topic``: at thousands of partitions /metrics shrinks to one series per
topic, the figures stay right (sums over partitions, shared by the tasks of one process), and every
query of the dashboard and the alert rules still finds its series and labels.

The series are made by the task's own handles (:func:`partition_metrics`) in the process-wide
Prometheus registry and read back from its real text exposition (what ``GET /metrics`` serves),
for 8,000 partitions (2,000 topics x 4) dealt to two tasks, as the scale benchmark's largest size.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from mirrorline.connectors.source_mirror.config import REPLICATION_METRICS_LEVEL, SOURCE_CONFIG_DEF
from mirrorline.connectors.source_mirror.partition_metrics import partition_metrics
from mirrorline.runtime.metrics import exposition

TOPICS, PARTITIONS = 2000, 4
PREFIX = "kafka_connect_mirror_source_connector_"


def _dashboard_helpers():
    path = Path(__file__).resolve().parent / "test_dashboard.py"
    spec = importlib.util.spec_from_file_location("mirrorline_dashboard_helpers_level", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dash = _dashboard_helpers()


def mirror(level: str, source: str, tasks: int = 2) -> list[dict]:
    """Handles for every partition, dealt round-robin to ``tasks`` tasks in this process; some traffic."""
    partitions = [(f"A.t{t:04d}", p) for t in range(TOPICS) for p in range(PARTITIONS)]
    handles = [{} for _ in range(tasks)]
    for i, (topic, p) in enumerate(partitions):
        handles[i % tasks][(topic, p)] = partition_metrics(level, (source, "B", topic, str(p)))
    for task in handles:
        for (topic, p), metric in task.items():
            metric.record_count.inc(10 + p)
            metric.byte_count.inc(100)
            metric.lag_records.set(p)  # lags 0, 1, 2, 3: 6 per topic
            metric.replication_latency_ms.set(50)
            metric.record_age_ms.set(70)
    return handles


def flow_lines(text: str, source: str) -> list[str]:
    return [line for line in text.splitlines()
            if line.startswith(PREFIX) and f'source="{source}"' in line]


def sample(name: str, **labels) -> float | None:
    return REGISTRY.get_sample_value(PREFIX + name, labels)


def stop(handles: list[dict]) -> None:
    for task in handles:
        for metric in task.values():
            metric.forget_gauges()


def test_the_setting_is_declared_with_partition_as_default():
    key = SOURCE_CONFIG_DEF.keys[REPLICATION_METRICS_LEVEL]
    assert key.default == "partition"
    assert SOURCE_CONFIG_DEF.parse({REPLICATION_METRICS_LEVEL: "topic", "source.cluster.alias": "A",
                                    "target.cluster.alias": "B"})[REPLICATION_METRICS_LEVEL] == "topic"
    with pytest.raises(Exception, match="partition, topic"):
        SOURCE_CONFIG_DEF.parse({REPLICATION_METRICS_LEVEL: "record", "source.cluster.alias": "A",
                                 "target.cluster.alias": "B"})


async def test_topic_level_shrinks_metrics_at_8000_partitions_and_keeps_every_query_working():
    per_partition, per_topic = mirror("partition", "LVLP"), mirror("topic", "LVLT")
    try:
        body, _ = await exposition()  # what GET /metrics serves
        text = body.decode()
        partition_lines, topic_lines = flow_lines(text, "LVLP"), flow_lines(text, "LVLT")
        # 8 series per partition (records, bytes, lost, 2 resets; age, latency, lag) vs the same per topic
        assert len(partition_lines) == 8 * TOPICS * PARTITIONS
        assert len(topic_lines) == 8 * TOPICS
        assert sum(map(len, topic_lines)) * 3 < sum(map(len, partition_lines))
        assert all('partition=""' in line for line in topic_lines)

        # the figures: counters summed over the topic's partitions, lag summed over both tasks' partitions
        assert sample("record_count_total", source="LVLT", target="B", topic="A.t0007", partition="") == 10 + 11 + 12 + 13
        assert sample("replication_lag_records", source="LVLT", target="B", topic="A.t0007", partition="") == 6
        assert sample("replication_latency_ms", source="LVLT", target="B", topic="A.t0007", partition="") == 50
        assert sample("record_count_total", source="LVLP", target="B", topic="A.t0007", partition="3") == 13

        # every dashboard and alert query finds its metrics, with the labels it selects and groups by
        labels: dict[str, set[str]] = {}
        for line in topic_lines:
            name, _, rest = line.partition("{")
            labels.setdefault(name, set()).update(
                part.split("=")[0] for part in rest.rsplit("}", 1)[0].split('",') if "=" in part)
        problems = []
        for where, expr in dash.all_exprs():
            for name in dash.metric_names(expr):
                if not name.startswith(PREFIX) or name.endswith(("skipped_topics_total", "copied_records_total",
                                                                 "acl_sync_errors_total")):
                    continue  # per flow, not per partition: the level does not change them
                if name not in labels:
                    problems.append(f"{where}: no {name} series at topic level")
                    continue
                selected, grouped = dash.label_uses(expr)
                used = {label for metric, label in selected if metric == name} | grouped
                missing = used - labels[name] - dash.TARGET_LABELS
                if missing:
                    problems.append(f"{where}: {name} at topic level lacks {sorted(missing)}")
        assert not problems, "\n".join(problems)
    finally:
        stop(per_partition)
        stop(per_topic)


def test_a_topic_gauge_stays_while_any_task_mirrors_the_topic_and_goes_with_the_last():
    first = partition_metrics("topic", ("LVLG", "B", "A.g", "0"))
    second = partition_metrics("topic", ("LVLG", "B", "A.g", "1"))
    first.lag_records.set(5)
    second.lag_records.set(7)
    assert sample("replication_lag_records", source="LVLG", target="B", topic="A.g", partition="") == 12
    first.forget_gauges()
    first.forget_gauges()  # once only
    assert sample("replication_lag_records", source="LVLG", target="B", topic="A.g", partition="") == 7
    second.forget_gauges()
    assert sample("replication_lag_records", source="LVLG", target="B", topic="A.g", partition="") is None
    # counters stay, so rates stay continuous
    assert sample("record_count_total", source="LVLG", target="B", topic="A.g", partition="") == 0
    again = partition_metrics("topic", ("LVLG", "B", "A.g", "0"))
    assert sample("replication_lag_records", source="LVLG", target="B", topic="A.g", partition="") == 0
    again.forget_gauges()


@pytest.mark.parametrize("level", ["partition", "topic"])
async def test_checkpoint_latency_follows_the_level(level):
    """The checkpoint connector reads the same setting: at topic level one series per group and
    topic (partition label empty) however many of the topic's partitions it checkpoints."""
    import time

    from mirrorline.api import RecordMetadata, SourceRecord
    from mirrorline.connectors.checkpoint.config import CHECKPOINT_CONFIG_DEF
    from mirrorline.connectors.checkpoint.task import MirrorCheckpointTask
    from mirrorline.connectors.mirror_client.formats import checkpoint_partition

    parsed = CHECKPOINT_CONFIG_DEF.parse({"source.cluster.alias": f"CK{level}", REPLICATION_METRICS_LEVEL: level})
    assert parsed[REPLICATION_METRICS_LEVEL] == level
    task = MirrorCheckpointTask()
    task.source, task.target = f"CK{level}", "B"
    task.latency_by_partition = level == "partition"
    now = int(time.time() * 1000)
    for p in range(PARTITIONS):
        record = SourceRecord(checkpoint_partition("g1", f"CK{level}.t0", p), {"offset": 0}, "checkpoints", 0,
                              b"k", b"v", [], now)
        await task.commit_record(record, RecordMetadata("checkpoints", 0, p, now))
    labels = [sample.labels for metric in REGISTRY.collect()
              if metric.name == "kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms"
              for sample in metric.samples if sample.labels.get("source") == f"CK{level}"]
    expected = [str(p) for p in range(PARTITIONS)] if level == "partition" else [""]
    assert sorted(label["partition"] for label in labels) == expected
    assert {label["group"] for label in labels} == {"g1"}
