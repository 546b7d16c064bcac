"""Single message transforms and predicates on MirrorSource, against real clusters A and B.

Connect's config syntax through a standalone worker's REST API and through an
``mm2.properties`` file; the example PII plugin on real mirrored data; a record a transform
cannot handle failing the task with a trace naming it; validation errors on their fields.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import subprocess
import sys

import pytest

from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from support.mm2 import isolated_state
from support.kafka import create_topic, produce, read_all
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

#: MirrorSource also mirrors the source's `heartbeats` topic whatever `topics` says (MM2's rule);
#: other tests of the session create one on A, and its binary values would fail a JSON transform.
ONLY_THIS_TOPIC = {"heartbeats.replication.enabled": "false"}

JAVA = "org.apache.kafka.connect.transforms."


def orders(count: int, partitions: int = 2) -> list[tuple]:
    """JSON orders; every third carries an ``audit`` header, and so does the last of each partition."""
    out = []
    for i in range(count):
        audit = i % 3 == 0 or i >= count - partitions
        value = {"id": i, "email": f"user{i % 4}@example.com", "ssn": f"123-45-{i:04d}", "amount": i * 10}
        headers = [("n", str(i).encode())] + ([("audit", b"1")] if audit else [])
        out.append((i % partitions, f"k{i}".encode(), json.dumps(value).encode(), headers, None))
    return out


def kept(sent: list[tuple], partition: int) -> list[tuple]:
    return [r for r in sent if r[0] == partition and not any(h[0] == "audit" for h in r[3])]


CHAIN = {
    "transforms": "route,audit,mask",
    "transforms.route.type": JAVA + "RegexRouter",
    "transforms.route.replacement": "routed.$1",
    "transforms.audit.type": JAVA + "Filter",
    "transforms.audit.predicate": "isAudit",
    "transforms.mask.type": JAVA + "MaskField$Value",
    "transforms.mask.fields": "ssn",
    "transforms.mask.replacement": "***-**-****",
    "predicates": "isAudit",
    "predicates.isAudit.type": JAVA + "predicates.HasHeaderKey",
    "predicates.isAudit.name": "audit",
}


async def test_regex_router_filter_and_mask_field_on_mirror_source_through_rest(cluster_a, cluster_b, make_topic,
                                                                             flow_config, unique_name, tmp_path):
    topic = await make_topic(cluster_a, partitions=2, prefix="smt")
    await create_topic(cluster_b.bootstrap_servers, f"routed.{topic}", 2)  # where RegexRouter sends them
    sent = orders(30)
    await produce(cluster_a.bootstrap_servers, topic, sent)
    name = unique_name("smt")
    config = {**flow_config(topics=topic, tasks_max=1), **ONLY_THIS_TOPIC, **CHAIN, "transforms.route.regex": r"A\.(.*)"}
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers,
              "offset.storage.file.filename": str(tmp_path / "offsets.json")}
    async with running_standalone(worker) as url, Rest(url) as rest:
        code, plugins = await rest.call("GET", "/connector-plugins?connectorsOnly=false")
        assert code == 200
        kinds = {p["class"]: p["type"] for p in plugins}
        assert kinds["mirrorline.transforms.routing.RegexRouter"] == "transformation"
        assert kinds["mirrorline.transforms.predicates.HasHeaderKey"] == "predicate"
        assert "transformation" not in {p["type"] for p in (await rest.call("GET", "/connector-plugins"))[1]}

        code, body = await rest.call("POST", "/connectors", {"name": name, "config": config})
        assert code == 201, body
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        expected = len(kept(sent, 0)) + len(kept(sent, 1))
        got = await read_all(cluster_b.bootstrap_servers, f"routed.{topic}", expect=expected, timeout=60)
        for partition in (0, 1):
            want = kept(sent, partition)
            records = got[partition]
            assert [r.key for r in records] == [k for _, k, _, _, _ in want]
            assert [list(r.headers) for r in records] == [h for _, _, _, h, _ in want]
            for record, (_, _, value, _, _) in zip(records, want, strict=True):
                original = json.loads(value)
                assert json.loads(record.value) == {**original, "ssn": "***-**-****"}
        # nothing reached the remote topic MirrorSource would have written to
        assert sum(len(r) for r in (await read_all(cluster_b.bootstrap_servers, f"A.{topic}", timeout=2)).values()) == 0
        # the last record of each partition was filtered out, and its offset is committed all the same
        last = {p: max(i for i, r in enumerate(sent) if r[0] == p) for p in (0, 1)}

        def committed_through_last(body):
            offsets = {o["partition"]["partition"]: o["offset"]["offset"] for o in body["offsets"]
                       if o["partition"].get("topic") == topic}
            return offsets == {p: last[p] // 2 for p in (0, 1)}

        await rest.wait_for(f"/connectors/{name}/offsets", committed_through_last, timeout=30)


async def test_transforms_from_an_mm2_properties_flow(cluster_a, cluster_b, unique_name, tmp_path):
    prefix = unique_name("mm2smt")
    topic = f"{prefix}-orders"
    await create_topic(cluster_a.bootstrap_servers, topic, 2)
    await create_topic(cluster_b.bootstrap_servers, f"routed.{topic}", 2)
    sent = orders(20)
    await produce(cluster_a.bootstrap_servers, topic, sent)
    flow = "\n".join(f"A->B.{key} = {value}" for key, value in CHAIN.items() if key != "predicates")
    # MM2 applies a flow's transforms to all three connectors: the predicate keeps MaskField to the data topic
    (tmp_path / "mm2.properties").write_text(f"""clusters = A, B
A.bootstrap.servers = {cluster_a.bootstrap_servers}
B.bootstrap.servers = {cluster_b.bootstrap_servers}
A->B.enabled = true
A->B.topics = {prefix}-.*
{SINGLE_BROKER_MM2_PROPERTIES}refresh.topics.interval.seconds = 2
B.offset.flush.interval.ms = 500
{isolated_state(prefix)}{flow}
A->B.transforms.route.regex = A\\\\.({prefix}-.*)
A->B.transforms.mask.predicate = isData
A->B.predicates = isAudit,isData
A->B.predicates.isData.type = TopicNameMatches
A->B.predicates.isData.pattern = routed\\\\..*
""")
    log_path = tmp_path / "mm2.log"
    with open(log_path, "a") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(tmp_path / "mm2.properties")],
                                stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        expected = len(kept(sent, 0)) + len(kept(sent, 1))
        got = await read_all(cluster_b.bootstrap_servers, f"routed.{topic}", expect=expected, timeout=90)
        values = [json.loads(r.value) for p in (0, 1) for r in got[p]]
        assert sorted(v["id"] for v in values) == sorted(json.loads(v)["id"] for p in (0, 1)
                                                          for _, _, v, _, _ in kept(sent, p))
        assert {v["ssn"] for v in values} == {"***-**-****"}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log_path.read_text()[-3000:]


async def test_pii_plugin_masks_fields_of_mirrored_records(cluster_a, cluster_b, make_topic, flow_config, unique_name):
    topic = await make_topic(cluster_a, partitions=1, prefix="pii")
    people = [{"id": i, "email": f"p{i % 2}@example.com", "customer": {"phone": f"+1-555-{i % 2}", "tier": "gold"}}
              for i in range(6)]
    await produce(cluster_a.bootstrap_servers, topic, [(0, None, json.dumps(p).encode(), [], None) for p in people])
    name = unique_name("pii")
    config = {**flow_config(topics=topic, tasks_max=1), **ONLY_THIS_TOPIC, "transforms": "pii",
              "transforms.pii.type": "com.example.PiiMask", "transforms.pii.fields": "email,customer.phone",
              "transforms.pii.hash.key": "k3y-for-tests"}
    async with running_standalone({"bootstrap.servers": cluster_b.bootstrap_servers}) as url, Rest(url) as rest:
        code, body = await rest.call("POST", "/connectors", {"name": name, "config": config})
        assert code == 201, body
        await rest.wait_for(f"/connectors/{name}/status", all_running(1))
        got = await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=6, timeout=60)
        values = [json.loads(r.value) for r in got[0]]

        def token(value):
            text = json.dumps(value, sort_keys=True, separators=(",", ":"))
            return "pii:" + hmac.new(b"k3y-for-tests", text.encode(), hashlib.sha256).hexdigest()

        assert values == [{"id": p["id"], "email": token(p["email"]),
                           "customer": {"phone": token(p["customer"]["phone"]), "tier": "gold"}} for p in people]
        assert values[0]["email"] == values[2]["email"] != values[1]["email"]  # same value, same token
        # the key is a PASSWORD setting of the transform: never shown by the REST API
        code, shown = await rest.call("GET", f"/connectors/{name}/config")
        assert shown["transforms.pii.hash.key"] == "[hidden]"


async def test_a_value_mask_field_cannot_read_fails_the_task_naming_the_record(cluster_a, cluster_b, make_topic,
                                                                                flow_config, unique_name):
    topic = await make_topic(cluster_a, partitions=1, prefix="smtbad")
    await produce(cluster_a.bootstrap_servers, topic, [(0, None, b'{"ssn": "1"}', [], None),
                                                        (0, None, b'{"ssn": "2"}', [], None),
                                                        (0, None, b"not json at all", [], None),
                                                        (0, None, b'{"ssn": "4"}', [], None)])
    name = unique_name("smtbad")
    config = {**flow_config(topics=topic, tasks_max=1), **ONLY_THIS_TOPIC, "transforms": "mask",
              "transforms.mask.type": JAVA + "MaskField$Value", "transforms.mask.fields": "ssn"}
    worker = {"bootstrap.servers": cluster_b.bootstrap_servers, "restart.on.failure.enable": "false"}
    async with running_standalone(worker, [{"name": name, **config}]) as url, Rest(url) as rest:
        status = await rest.wait_for(f"/connectors/{name}/status",
                                     lambda s: any(t["state"] == "FAILED" for t in s["tasks"]), timeout=60)
        trace = status["tasks"][0]["trace"]
        assert f"Transform mask (MaskFieldValue) failed on the record from topic {topic} partition 0 offset 2 " \
               f"(bound for topic A.{topic} partition 0)" in trace
        assert "needs the record value to be a JSON object, but it is not JSON" in trace
        assert status["connector"]["state"] == "RUNNING"
        copied = await read_all(cluster_b.bootstrap_servers, f"A.{topic}", expect=2, timeout=10)
        # the records before it were written (masked); nothing after it was
        assert [json.loads(r.value) for r in copied[0]] == [{"ssn": ""}, {"ssn": ""}]


async def test_validate_reports_bad_transform_settings_on_their_fields(cluster_b, flow_config):
    config = {**flow_config(topics="x"), "name": "v",
              "transforms": "route,nope,drop,neg",
              "transforms.route.type": JAVA + "RegexRouter", "transforms.route.regex": "orders(",
              "transforms.route.replacement": "x",
              "transforms.nope.type": "com.example.NoSuchTransform",
              "transforms.drop.type": JAVA + "Filter", "transforms.drop.predicate": "undeclared",
              "transforms.neg.type": "Filter", "transforms.neg.negate": "true"}
    async with running_standalone({"bootstrap.servers": cluster_b.bootstrap_servers}) as url, Rest(url) as rest:
        code, infos = await rest.call("PUT", "/connector-plugins/MirrorSourceConnector/config/validate", config)
        assert code == 200
        errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]["errors"]}
        assert set(errors) == {"transforms.route.regex", "transforms.nope.type", "transforms.drop.predicate",
                               "transforms.neg.negate"}
        assert errors["transforms.route.regex"][0].startswith(
            "Invalid value orders( for configuration transforms.route.regex: invalid regular expression")
        assert "Class com.example.NoSuchTransform could not be found" in errors["transforms.nope.type"][0]
        assert "no predicate with alias undeclared" in errors["transforms.drop.predicate"][0]
        assert infos["error_count"] == 4
        assert "Transforms: route" in infos["groups"]
        # a predicate listed but not configured is an error on its type
        code, infos = await rest.call("PUT", "/connector-plugins/MirrorSourceConnector/config/validate",
                                      {**flow_config(topics="x"), "name": "v", "predicates": "p"})
        errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]["errors"]}
        assert errors == {"predicates.p.type": ['Missing required configuration "predicates.p.type" which has no '
                                                'default value.']}
        # creating it is refused with the same errors
        code, body = await rest.call("POST", "/connectors", {"name": "v", "config": config})
        assert code == 400 and "transforms.route.regex" in body["message"]
        # a transform's settings are served like a connector's (Connect's GET .../config for plugins)
        code, keys = await rest.call("GET", "/connector-plugins/org.apache.kafka.connect.transforms.RegexRouter/config")
        assert code == 200 and [k["name"] for k in keys] == ["regex", "replacement"]
