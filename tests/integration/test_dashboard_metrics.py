"""Every metric the Grafana dashboard and the alert rules under deploy/ query is one a live
worker exports, checked against real ``GET /metrics`` output.

1. A freshly started standalone worker running MirrorSource and MirrorCheckpoint, with no fault
   at all, exports every queried series (``kafka_connect_worker_*`` aside, which only distributed
   and MM2-mode workers have), at 0 where nothing happened yet: the panels say 0, not "No data".
   Its series are told apart from earlier tests' in this process by unique cluster aliases and
   connector names. A second MirrorSource flow at ``replication.metrics.level=topic`` exports one
   series per topic and every query still finds its metrics and labels. Series of features these
   tests do not turn on (exactly-once, scheduled reconciliation: :data:`FEATURE_ONLY`) need only be
   declared.
2. A standalone worker on cluster B runs a MirrorSource A->B flow, a MirrorCheckpoint flow for a
   group that committed offsets on A, and a SequenceSource that fails, so that the series an
   event moves (task failures and restarts, a skipped topic) are exercised too. A one-worker
   distributed cluster exports the ``kafka_connect_worker_*`` series, which a standalone worker
   has not.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
from pathlib import Path

import aiohttp
import pytest
from aiokafka import TopicPartition

from support.distributed import WorkerCluster
from support.kafka import commit_on, create_topic, produce, read_all
from support.worker import Rest, running_standalone

pytestmark = pytest.mark.integration


def _load_dashboard_helpers():
    path = Path(__file__).resolve().parents[1] / "unit" / "test_dashboard.py"
    spec = importlib.util.spec_from_file_location("mirrorline_dashboard_helpers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dash = _load_dashboard_helpers()

#: Prefixes of series only a feature these tests do not turn on exports, with that feature: their
#: declaration is checked instead. Every other series the dashboard and the alerts query exists from
#: the start (at 0) on a healthy worker; keep it that way.
FEATURE_ONLY = {
    "kafka_connect_source_task_": "exactly-once source support (an exactly-once task has them at 0 from its start)",
    "mirrorline_reconcile_": "scheduled reconciliation (reconcile.interval.ms, a Spark job per interval)",
}


def feature_only(names: set[str]) -> set[str]:
    """The names of ``names`` that only a feature listed in :data:`FEATURE_ONLY` exports."""
    return {n for n in names if n.startswith(tuple(FEATURE_ONLY))}


_SAMPLE_LABEL = re.compile(r'([a-zA-Z_]\w*)="(?:[^"\\]|\\.)*"')
PARTITIONS = 2
RECORDS = 60


def sample_labels(metrics_text: str) -> dict[str, set[str]]:
    """Metric name -> every label name its series carry in ``metrics_text``."""
    labels: dict[str, set[str]] = {}
    for line in metrics_text.splitlines():
        if line and not line.startswith("#"):
            name, _, rest = line.partition("{")
            name = name.split()[0]
            labels.setdefault(name, set()).update(_SAMPLE_LABEL.findall(rest.rsplit("}", 1)[0]) if rest else ())
    return labels



async def metrics_when(url: str, needed: set[str], markers: tuple[str, ...] = (), timeout: float = 60.0) -> str:
    """``GET url/metrics`` until every name of ``needed`` that it declares has a series and every
    string of ``markers`` appears; returns the text.

    A name it does not declare at all (a misspelt one) is not waited for: the caller reports it.
    ``markers`` name this test's own series, as earlier tests in the same process may have left
    series of the same names.
    """
    deadline = asyncio.get_running_loop().time() + timeout
    text = None
    async with Rest(url) as rest:
        while asyncio.get_running_loop().time() < deadline:
            try:
                status, body = await rest.call("GET", "/metrics")
            except aiohttp.ClientError:  # a worker process still starting
                status = 0
            if status == 200:
                text = body
                declared, sampled = dash.exported_names(text)
                if needed & declared <= sampled and all(marker in text for marker in markers):
                    break
            await asyncio.sleep(0.5)
    assert text is not None, f"{url}/metrics never answered"
    missing = [marker for marker in markers if marker not in text]
    assert not missing, f"{url}/metrics never showed {missing}"
    return text


async def post_connector(url: str, body: dict, timeout: float = 60.0) -> None:
    """Create a connector on a distributed worker, retrying while the group (re)balances."""
    deadline = asyncio.get_running_loop().time() + timeout
    async with Rest(url) as rest:
        while True:
            try:
                status, answer = await rest.call("POST", "/connectors", body)
                if status == 201:
                    return
            except aiohttp.ClientError as exc:
                status, answer = 0, repr(exc)
            assert asyncio.get_running_loop().time() < deadline, f"POST /connectors: {status} {answer}"
            await asyncio.sleep(0.5)


def _series_of(metrics_text: str, name: str, label: str, value: str) -> list[str]:
    """The series lines of ``name`` whose ``label`` is ``value``."""
    return [line for line in metrics_text.splitlines()
            if line.startswith(name + "{") and f'{label}="{value}"' in line.split("}")[0]]


async def test_a_fresh_healthy_worker_exports_every_queried_series(cluster_a, cluster_b, flow_config, unique_name,
                                                                   tmp_path):
    exprs = dash.all_exprs()
    used = set().union(*(dash.metric_names(expr) for _, expr in exprs)) - dash.PROMETHEUS_SERIES
    standalone_names = {n for n in used if not n.startswith("kafka_connect_worker_")} - feature_only(used)
    tag = unique_name("fresh").rsplit("-", 1)[1]
    alias, topic_alias = f"F{tag}", f"T{tag}"  # this test's series: no earlier test used these aliases
    prefix = unique_name("fresh")
    topic, wide = f"{prefix}-orders", f"{prefix}-wide"
    await create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    await create_topic(cluster_a.bootstrap_servers, wide, 6)
    await produce(cluster_a.bootstrap_servers, topic, [
        (i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), [], None) for i in range(RECORDS)])
    await produce(cluster_a.bootstrap_servers, wide, [(i % 6, None, b"w", [], None) for i in range(30)])
    group = f"{prefix}-app"
    await commit_on(cluster_a.bootstrap_servers, group, {TopicPartition(topic, p): 10 + p for p in range(PARTITIONS)})
    connectors = [
        {"name": f"{prefix}-source", **flow_config(topics=topic, tasks_max=1, offset_lag_max=10, source_alias=alias)},
        {"name": f"{prefix}-checkpoint", **flow_config(
            connector_class="MirrorCheckpointConnector", groups=group, topics=topic, tasks_max=1, source_alias=alias,
            **{"emit.checkpoints.interval.seconds": 1, "refresh.groups.interval.seconds": 1,
               "checkpoints.topic.replication.factor": 1})},
        {"name": f"{prefix}-by-topic", **flow_config(topics=wide, tasks_max=2, source_alias=topic_alias,
                                                      **{"replication.metrics.level": "topic",
                                                         # its one topic only, whatever heartbeats
                                                         # topics other tests left on A
                                                         "heartbeats.replication.enabled": "false"})},
    ]
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    async with running_standalone(worker, connectors) as url:
        await read_all(cluster_b.bootstrap_servers, f"{alias}.{topic}", expect=RECORDS)
        text = await metrics_when(url, standalone_names, markers=(
            f'kafka_connect_mirror_checkpoint_connector_checkpoint_age_seconds{{group="{group}"',
            f'kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms{{group="{group}"',
            f'source="{topic_alias}"'))

    # which label names this worker's own series of each metric
    own = {name: ("connector", f"{prefix}-source") if name.startswith("kafka_connect_task_")
           or name.startswith("kafka_connect_connector_") else ("source", alias) for name in standalone_names}
    problems = []
    for name in sorted(standalone_names):
        if name.startswith("process_"):
            if name not in dash.exported_names(text)[1]:
                problems.append(f"{name}: no series")
            continue
        label, value = own[name]
        if not _series_of(text, name, label, value):
            problems.append(f"{name}: no series with {label}={value!r} on a fresh, healthy worker")
    assert not problems, "\n".join(problems)
    # no fault happened: the event series are there, at 0
    for name, label, value in (("kafka_connect_task_stalled", "connector", f"{prefix}-source"),
                               ("kafka_connect_task_retrying", "connector", f"{prefix}-source"),
                               ("kafka_connect_connector_failures_total", "connector", f"{prefix}-checkpoint"),
                               ("kafka_connect_connector_restarts_total", "connector", f"{prefix}-checkpoint"),
                               ("kafka_connect_mirror_source_connector_skipped_topics_total", "source", alias),
                               ("kafka_connect_mirror_source_connector_records_lost_to_retention_total", "source", alias)):
        values = {float(line.rsplit(" ", 1)[1]) for line in _series_of(text, name, label, value)}
        assert values == {0.0}, (name, values)

    # topic level: one series per topic, the partition label empty, and every query's labels there
    by_topic = _series_of(text, "kafka_connect_mirror_source_connector_record_count_total", "source", topic_alias)
    assert len(by_topic) == 1 and 'partition=""' in by_topic[0] and by_topic[0].endswith(" 30.0"), by_topic
    lag = _series_of(text, "kafka_connect_mirror_source_connector_replication_lag_records", "source", topic_alias)
    assert len(lag) == 1, lag
    topic_level = "\n".join(line for line in text.splitlines() if f'source="{topic_alias}"' in line)
    labels = sample_labels(topic_level)
    for where, expr in exprs:
        for metric, label in dash.label_uses(expr)[0]:
            if metric in labels and label not in labels[metric] | dash.TARGET_LABELS:
                problems.append(f"{where}: at topic level {metric} has no label {label!r}")
    assert not problems, "\n".join(problems)


async def test_dashboard_and_alerts_query_only_exported_metrics(cluster_a, cluster_b, flow_config, unique_name,
                                                                make_topic, tmp_path):
    exprs = dash.all_exprs()
    used = set().union(*(dash.metric_names(expr) for _, expr in exprs)) - dash.PROMETHEUS_SERIES
    worker_names = {n for n in used if n.startswith("kafka_connect_worker_")}

    # a distributed worker, starting while the flows are set up
    cluster = WorkerCluster(cluster_b.bootstrap_servers, unique_name("dash-dist"), tmp_path)
    try:
        distributed = cluster.add_worker()

        prefix = unique_name("dash")
        topic = f"{prefix}-orders"
        await create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
        await produce(cluster_a.bootstrap_servers, topic, [
            (i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), [], None) for i in range(RECORDS)])
        # "A." + this name is over Kafka's 249 characters: the flow skips it and counts it
        await create_topic(cluster_a.bootstrap_servers, f"{prefix}-" + "x" * (248 - len(prefix) - 1), 1)
        group = f"{prefix}-app"
        await commit_on(cluster_a.bootstrap_servers, group,
                        {TopicPartition(topic, p): 10 + p for p in range(PARTITIONS)})

        sequence_topic = await make_topic(cluster_b)
        connectors = [
            {"name": f"{prefix}-source", **flow_config(topics=f"{prefix}-.*", tasks_max=1, offset_lag_max=10)},
            {"name": f"{prefix}-checkpoint", **flow_config(
                connector_class="MirrorCheckpointConnector", groups=f"{prefix}-.*", topics=f"{prefix}-.*",
                tasks_max=1, **{"emit.checkpoints.interval.seconds": 1, "refresh.groups.interval.seconds": 1,
                                "checkpoints.topic.replication.factor": 1})},
            {"name": f"{prefix}-failing", "connector.class": "SequenceSource", "topic": sequence_topic,
             "tasks.max": "1", "records.per.poll": "5", "poll.interval.ms": "20", "fail.on.seq": "3"},
        ]
        worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
                  "offset.storage.file.filename": str(tmp_path / "offsets.json"),
                  "restart.backoff.initial.ms": "200", "restart.backoff.max.ms": "1000"}
        async with running_standalone(worker, connectors) as url:
            await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=RECORDS)
            standalone_text = await metrics_when(url, used - worker_names - feature_only(used), markers=(
                f'kafka_connect_mirror_checkpoint_connector_checkpoint_age_seconds{{group="{group}"',
                f'kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms{{group="{group}"',
                f'kafka_connect_task_restarts_total{{connector="{prefix}-failing"',
                f'topic="A.{topic}"'))

        try:
            await post_connector(distributed.url, {"name": f"{prefix}-seq", "config": {
                "connector.class": "SequenceSource", "topic": sequence_topic, "tasks.max": "1", "max.records": "5"}})
            distributed_text = await metrics_when(distributed.url, worker_names, markers=(
                f'kafka_connect_worker_task_assigned{{connector="{prefix}-seq"',))
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{cluster.logs()}") from None
    finally:
        cluster.close()

    declared, sampled = set(), set()
    for text in (standalone_text, distributed_text):
        names = dash.exported_names(text)
        declared |= names[0]
        sampled |= names[1]
    labels = sample_labels(standalone_text)
    for name, found in sample_labels(distributed_text).items():
        labels.setdefault(name, set()).update(found)

    problems = []
    for where, expr in exprs:
        for name in sorted(dash.metric_names(expr) - dash.PROMETHEUS_SERIES):
            if name not in declared | sampled:
                problems.append(f"{where}: {name} is not exported (no # TYPE line, no series in /metrics)")
            elif name not in sampled and name not in feature_only({name}):
                problems.append(f"{where}: {name} is declared but has no series, although this test made "
                                f"its event happen")
        for metric, label in dash.label_uses(expr)[0]:
            if metric in labels and label not in labels[metric] | dash.TARGET_LABELS:
                problems.append(f"{where}: {metric} series have no label {label!r} ({sorted(labels[metric])})")
    assert not problems, "\n".join(problems)
    # the worker series come from the distributed worker itself, not from anything in this process
    assert worker_names <= dash.exported_names(distributed_text)[1]
    assert f'kafka_connect_mirror_checkpoint_connector_failover_reread_records{{group="{group}"' in standalone_text
