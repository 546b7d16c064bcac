"""Error tolerance on the source path against real Kafka: ``errors.tolerance``, its log, metrics and offsets.

A MirrorSource A->B with a ``MaskField$Value`` transform, and records on A that are not JSON:
with ``errors.tolerance=none`` the task goes FAILED with a trace naming the stage, the class
and the record's topic, partition and offset; with ``all`` the bad records are skipped and
counted (Connect's task-error metrics on ``GET /metrics``), the good ones are mirrored in order,
and the offsets of the skipped records still commit. A FileStreamSource whose value converter
cannot encode a line shows the same at the converter stage.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import pytest

from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.kafka import create_topic, produce, read_all
from support.mm2 import isolated_state
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

ONLY_THIS_TOPIC = {"heartbeats.replication.enabled": "false"}  # see test_mirror_transforms.py
MASK = {"transforms": "mask", "transforms.mask.type": "org.apache.kafka.connect.transforms.MaskField$Value",
        "transforms.mask.fields": "ssn"}
BAD = b"not json at all"


def metric(text: str, name: str, connector: str) -> float | None:
    """The value of ``kafka_connect_task_error_metrics_<name>_total`` for the connector's task 0."""
    pattern = (rf'^kafka_connect_task_error_metrics_{name.replace("-", "_")}_total'
               rf'\{{connector="{re.escape(connector)}",task="0"\}} (\S+)$')
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else None


async def test_tolerance_none_fails_the_task_naming_stage_class_topic_partition_and_offset(
        cluster_a, cluster_b, make_topic, flow_config, unique_name):
    topic = await make_topic(cluster_a, partitions=1, prefix="errnone")
    await produce(cluster_a.bootstrap_servers, topic, [(0, None, b'{"ssn": "1"}', [], None),
                                                        (0, None, b'{"ssn": "2"}', [], None),
                                                        (0, None, BAD, [], None),
                                                        (0, None, b'{"ssn": "4"}', [], None)])
    name = unique_name("errnone")
    config = {**flow_config(topics=topic, tasks_max=1), **ONLY_THIS_TOPIC, **MASK, "errors.tolerance": "none"}
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers, "restart.on.failure.enable": "false"}
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        status = await rest.wait_for(f"/connectors/{name}/status",
                                     lambda s: any(t["state"] == "FAILED" for t in s["tasks"]), timeout=60)
        trace = status["tasks"][0]["trace"]
        assert (f"Tolerance exceeded in error handler: stage TRANSFORMATION "
                f"(mirrorline.transforms.fields.MaskFieldValue) failed on the record from topic {topic} "
                f"partition 0 offset 2") in trace
        assert "Transform mask (MaskFieldValue) failed" in trace
        assert "needs the record value to be a JSON object, but it is not JSON" in trace
        copied = await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=2, timeout=10)
        assert [json.loads(r.value) for r in copied[0]] == [{"ssn": ""}, {"ssn": ""}]  # nothing after it
        _, text = await rest.call("GET", "/metrics")
        assert metric(text, "total-record-errors", name) == 1
        assert metric(text, "total-records-skipped", name) == 0


async def test_tolerance_all_skips_and_counts_bad_records_mirrors_the_rest_in_order_and_commits(
        cluster_a, cluster_b, make_topic, flow_config, unique_name, tmp_path, caplog):
    topic = await make_topic(cluster_a, partitions=2, prefix="errall")
    sent = []
    for i in range(24):
        bad = i % 5 == 3 or i == 23  # the last record of partition 1 is bad: its offset must commit anyway
        value = BAD if bad else json.dumps({"id": i, "ssn": f"123-{i}"}).encode()
        sent.append((i % 2, str(i).encode(), value, [("n", str(i).encode())], None))
    await produce(cluster_a.bootstrap_servers, topic, sent)
    bad_count = sum(1 for r in sent if r[2] == BAD)
    name = unique_name("errall")
    config = {**flow_config(topics=topic, tasks_max=1), **ONLY_THIS_TOPIC, **MASK, "errors.tolerance": "all",
              "errors.log.enable": "true"}
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        await rest.wait_for(f"/connectors/{name}/status", all_running(1), timeout=60)
        good = [r for r in sent if r[2] != BAD]
        got = await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=len(good), timeout=60)
        for partition in (0, 1):
            want = [r for r in good if r[0] == partition]
            records = got[partition]
            assert [r.key for r in records] == [k for _, k, _, _, _ in want]  # in order, none missing, none extra
            assert [json.loads(r.value) for r in records] == [{**json.loads(v), "ssn": ""} for _, _, v, _, _ in want]

        last = {p: max(i for i, r in enumerate(sent) if r[0] == p) // 2 for p in (0, 1)}

        def committed_through_last(body):
            offsets = {o["partition"]["partition"]: o["offset"]["offset"] for o in body["offsets"]
                       if o["partition"].get("topic") == topic}
            return offsets == last

        await rest.wait_for(f"/connectors/{name}/offsets", committed_through_last, timeout=30)
        _, text = await rest.call("GET", "/metrics")
        assert metric(text, "total-records-skipped", name) == bad_count
        assert metric(text, "total-record-errors", name) == bad_count
        assert metric(text, "total-record-failures", name) == bad_count
        assert metric(text, "total-errors-logged", name) == bad_count
        assert metric(text, "total-retries", name) == 0
        status = (await rest.call("GET", f"/connectors/{name}/status"))[1]
        assert status["tasks"][0]["state"] == "RUNNING"
    logged = [r.getMessage() for r in caplog.records if "Error encountered in task" in r.getMessage()
              and name in r.getMessage()]
    assert len(logged) == bad_count
    assert "Executing stage 'TRANSFORMATION' with class 'mirrorline.transforms.fields.MaskFieldValue'" in logged[0]


@pytest.mark.parametrize("tolerance", ["none", "all"])
async def test_a_value_converter_failure_is_tolerated_or_fails_the_task(cluster_a, make_topic, unique_name, tmp_path,
                                                                        tolerance):
    topic = await make_topic(cluster_a, partitions=1, prefix=f"errconv{tolerance}")
    lines = tmp_path / "lines.txt"
    lines.write_text("plain one\ncafé two\nplain three\n", encoding="utf-8")
    name = unique_name("errconv")
    config = {"connector.class": "FileStreamSource", "file": str(lines), "topic": topic,
              "value.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter.converter.encoding": "ascii", "errors.tolerance": tolerance}
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers, "restart.on.failure.enable": "false",
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        if tolerance == "none":
            status = await rest.wait_for(f"/connectors/{name}/status",
                                         lambda s: any(t["state"] == "FAILED" for t in s["tasks"]), timeout=60)
            trace = status["tasks"][0]["trace"]
            assert "stage VALUE_CONVERTER (mirrorline.converters.string.StringConverter) failed on the record from " \
                   f"source partition {{'filename': '{lines}'}} source offset {{'position': 20}}" in trace
            assert "DataError: Failed to serialize to a string: 'ascii' codec can't encode" in trace
            got = await read_all(cluster_a.bootstrap_servers, topic, expect=1, timeout=10)
            assert [r.value for r in got[0]] == [b"plain one"]
        else:
            got = await read_all(cluster_a.bootstrap_servers, topic, expect=2, timeout=30)
            assert [r.value for r in got[0]] == [b"plain one", b"plain three"]

            def at_end(body):
                return [o["offset"] for o in body["offsets"]] == [{"position": len(lines.read_bytes())}]

            await rest.wait_for(f"/connectors/{name}/offsets", at_end, timeout=30)
            _, text = await rest.call("GET", "/metrics")
            assert metric(text, "total-records-skipped", name) == 1


async def test_tolerance_from_an_mm2_properties_flow(cluster_a, cluster_b, unique_name, tmp_path):
    """MM2 users set ``errors.*`` per flow in ``mm2.properties``; the dedicated-mode worker honours them."""
    prefix = unique_name("mm2err")
    topic = f"{prefix}-orders"
    await create_topic(cluster_a.bootstrap_servers, topic, 1)
    sent = [(0, str(i).encode(), BAD if i % 4 == 1 else json.dumps({"id": i, "ssn": "x"}).encode(), [], None)
            for i in range(12)]
    await produce(cluster_a.bootstrap_servers, topic, sent)
    # MM2 applies a flow's transforms to all three connectors: the predicate keeps MaskField to the data topic.
    (tmp_path / "mm2.properties").write_text(f"""clusters = A, B
A.bootstrap.servers = {cluster_a.bootstrap_servers}
B.bootstrap.servers = {cluster_b.bootstrap_servers}
A->B.enabled = true
A->B.topics = {topic}
{SINGLE_BROKER_MM2_PROPERTIES}{isolated_state(prefix)}A->B.transforms = mask
A->B.transforms.mask.type = org.apache.kafka.connect.transforms.MaskField$Value
A->B.transforms.mask.fields = ssn
A->B.transforms.mask.predicate = isData
A->B.predicates = isData
A->B.predicates.isData.type = TopicNameMatches
A->B.predicates.isData.pattern = A\\\\.{prefix}-.*
A->B.errors.tolerance = all
A->B.errors.log.enable = true
""")
    log_path = tmp_path / "mm2.log"
    with open(log_path, "a") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(tmp_path / "mm2.properties")],
                                stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        good = [r for r in sent if r[2] != BAD]
        got = await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=len(good), timeout=90)
        assert [r.key for r in got[0]] == [k for _, k, _, _, _ in good]
        assert {json.loads(r.value)["ssn"] for r in got[0]} == {""}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    output = log_path.read_text()
    assert code == 0, output[-3000:]
    assert output.count("Error encountered in task") == len(sent) - len(good), output[-3000:]
