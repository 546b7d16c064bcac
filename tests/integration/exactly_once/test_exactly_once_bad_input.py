"""Exactly-once settings that cannot hold are refused, with the reason, and a denied transactional id fails visibly.

- On a distributed worker with ``exactly.once.source.support=enabled``: an invalid
  ``transaction.boundary`` is a 400 listing the allowed values; ``exactly.once.support=required``
  for a MirrorSource that would read uncommitted source records, and ``transaction.boundary=
  connector`` for a connector that cannot define boundaries, are 400s with Connect's (and MM2's)
  reasons, at ``config/validate`` and at ``PUT``; ``PUT /connectors/{name}/fence`` answers 204.
- A standalone worker refuses ``exactly.once.support=required`` (beyond Connect, which accepts
  it there and runs at-least-once).
- On a target cluster whose ACLs deny the worker's principal its transactional ids, the task is
  FAILED with a trace naming the missing permission; once granted, a restart mirrors every record.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.localkafka.manager import LocalKafka
from mirrorline.testing.fixtures import _free_base_port
from support.acls import Acl, grant
from support.distributed import WorkerCluster, wait_for_status
from support.eos import read_committed, read_committed_messages
from support.kafka import create_topic, produce
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

MIRROR_USER, MIRROR_PASSWORD = "mirror", "mirror-secret"


@pytest.fixture
def eos_worker(cluster_b, unique_name, tmp_path):
    cluster = WorkerCluster(cluster_b.bootstrap_servers, unique_name("eosbad"), tmp_path,
                            {"exactly.once.source.support": "enabled"})
    cluster.add_worker()
    yield cluster
    cluster.close()


def _errors(infos: dict, name: str) -> list[str]:
    return [e for c in infos["configs"] if c["value"]["name"] == name for e in c["value"]["errors"]]


async def test_rest_refuses_exactly_once_settings_that_cannot_hold(eos_worker, flow_config, unique_name, cluster_a):
    await eos_worker.wait_healthy()
    name = unique_name("m")
    async with Rest(eos_worker.workers[0].url) as rest:
        bad_boundary = flow_config(topics="none", transaction_boundary="batch")
        status, body = await rest.call("PUT", f"/connectors/{name}/config", bad_boundary)
        assert status == 400, body
        assert ("Invalid value batch for configuration transaction.boundary: String must be one of (case "
                "insensitive): POLL, INTERVAL, CONNECTOR") in body["message"]

        uncommitted = flow_config(topics="none", exactly_once_support="required",
                                  source_consumer_isolation_level="read_uncommitted")
        status, infos = await rest.call("PUT", "/connector-plugins/MirrorSourceConnector/config/validate",
                                        uncommitted)
        assert status == 200 and infos["error_count"] >= 2
        reasons = " ".join(_errors(infos, "exactly.once.support"))
        assert "The connector does not support exactly-once semantics with the provided configuration." in reasons
        assert "isolation.level set to 'read_committed'" in reasons
        status, body = await rest.call("PUT", f"/connectors/{name}/config", uncommitted)
        assert status == 400 and "exactly.once.support" in body["message"]
        assert "does not support exactly-once semantics" in body["message"]

        status, body = await rest.call("PUT", f"/connectors/{name}/config",
                                       flow_config(topics="none", transaction_boundary="connector"))
        assert status == 400
        assert "does not support connector-defined transaction boundaries" in body["message"]

        # what can hold is accepted (with a topic of its own for its offsets), and the fencing endpoint answers
        topic, own_offsets = unique_name("t"), f"{name}-offsets"
        await create_topic(cluster_a.bootstrap_servers, topic, 1)
        await produce(cluster_a.bootstrap_servers, topic, [(0, None, f"v{i}".encode(), [], None) for i in range(30)])
        status, body = await rest.call("PUT", f"/connectors/{name}/config",
                                       flow_config(topics=topic, tasks_max=1, exactly_once_support="REQUIRED",
                                                   transaction_boundary="Interval",
                                                   transaction_boundary_interval_ms=500,
                                                   offsets_storage_topic=own_offsets,
                                                   # only this topic's offset is expected: a heartbeats
                                                   # topic other tests left on A stays out
                                                   heartbeats_replication_enabled="false"))
        assert status == 201, body
        await wait_for_status(rest, name, all_running(1), timeout=90)
        assert (await rest.call("PUT", f"/connectors/{name}/fence"))[0] == 204
        status, body = await rest.call("PUT", "/connectors/no-such-connector/fence")
        assert status == 404, body
        expected = {"partition": {"cluster": "A", "partition": 0, "topic": topic}, "offset": {"offset": 29}}
        await rest.wait_for(f"/connectors/{name}/offsets", lambda b: b["offsets"] == [expected], timeout=60)
    # the offsets went to the connector's own topic (in its transactions), not to the worker's
    own = await asyncio.to_thread(read_committed_messages, eos_worker.bootstrap, own_offsets)
    keys = [json.loads(key) for records in own.values() for _, key, _ in records]
    assert [name, expected["partition"]] in keys
    worker_offsets = await asyncio.to_thread(read_committed_messages, eos_worker.bootstrap, f"{eos_worker.name}-offsets")
    assert not [k for records in worker_offsets.values() for _, k, _ in records if json.loads(k)[0] == name]


async def test_standalone_worker_refuses_required(cluster_b, flow_config, tmp_path):
    async with running_standalone({"bootstrap.servers": cluster_b.bootstrap_servers,
                                   "exactly.once.source.support": "enabled"}) as url:
        async with Rest(url) as rest:
            status, body = await rest.call("PUT", "/connectors/m/config",
                                           flow_config(topics="none", exactly_once_support="required"))
            assert status == 400
            assert "This worker does not have exactly-once source support enabled." in body["message"]
            assert "Standalone workers never write exactly-once" in body["message"]
            status, body = await rest.call("PUT", "/connectors/m/fence")
            assert status in (400, 404), body


@pytest.fixture(scope="module")
def acl_target(kafka_clusters, tmp_path_factory):
    """A single-node target cluster ``EOSACL`` (SASL/PLAIN, Kafka's authorizer) where ``mirror`` may do
    anything but use transactional ids."""
    manager = LocalKafka(tmp_path_factory.mktemp("eos-acl-kafka"), _free_base_port(1))
    try:
        (cluster,) = manager.start(["EOSACL"], sasl_users={MIRROR_USER: MIRROR_PASSWORD}, authorizer=True)
        asyncio.run(grant(cluster.spec.client_properties(), [
            Acl(f"User:{MIRROR_USER}", "all", kind, name)
            for kind, name in (("cluster", "kafka-cluster"), ("topic", "*"), ("group", "*"))]))
        yield cluster.spec
    finally:
        manager.stop()


async def test_denied_transactional_id_fails_the_task_naming_the_permission(acl_target, cluster_a, unique_name,
                                                                           tmp_path):
    user = {k: v for k, v in acl_target.client_properties(MIRROR_USER).items() if k != "bootstrap.servers"}
    group = unique_name("eosacl")
    workers = WorkerCluster(acl_target.bootstrap_servers, group, tmp_path,
                            {"exactly.once.source.support": "enabled", **user,
                             **{f"{role}.{k}": v for role in ("producer", "consumer", "admin") for k, v in user.items()}})
    workers.add_worker()
    topic, name = unique_name("t"), unique_name("m")
    await create_topic(cluster_a.bootstrap_servers, topic, 1)
    await produce(cluster_a.bootstrap_servers, topic, [(0, None, f"v{i}".encode(), [], None) for i in range(50)])
    config = {"connector.class": "MirrorSourceConnector", "source.cluster.alias": "A", "target.cluster.alias": "T",
              "source.cluster.bootstrap.servers": cluster_a.bootstrap_servers,
              "target.cluster.bootstrap.servers": acl_target.bootstrap_servers,
              **{f"target.cluster.{k}": v for k, v in user.items()}, "offset-syncs.topic.location": "target",
              "replication.factor": "1", "offset-syncs.topic.replication.factor": "1", "topics": topic,
              "tasks.max": "1", "sync.topic.acls.enabled": "false"}
    try:
        await workers.wait_healthy()
        async with Rest(workers.workers[0].url) as rest:
            status, body = await rest.call("PUT", f"/connectors/{name}/config", config)
            assert status == 201, body
            failed = await wait_for_status(rest, name, lambda s: s["tasks"] and s["tasks"][0]["state"] == "FAILED",
                                           timeout=90)
            trace = failed["tasks"][0]["trace"]
            transactional_id = f"{group}-{name}-0"
            assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in trace and transactional_id in trace, trace
            assert "WRITE and DESCRIBE on TransactionalId" in trace, trace
            # not a loop: the task stays FAILED (restarts back off), it never reports RUNNING meanwhile
            await asyncio.sleep(3)
            status_now = (await rest.call("GET", f"/connectors/{name}/status"))[1]
            assert status_now["tasks"][0]["state"] in ("FAILED", "UNASSIGNED"), status_now

            await grant(acl_target.client_properties(), [
                Acl(f"User:{MIRROR_USER}", op, "transactional_id", group, prefixed=True)
                for op in ("write", "describe")])
            assert (await rest.call("POST", f"/connectors/{name}/tasks/0/restart"))[0] == 204
            await wait_for_status(rest, name, all_running(1), timeout=90)
        deadline = time.monotonic() + 60
        while True:
            held = await asyncio.to_thread(read_committed, acl_target.bootstrap_servers, f"A.{topic}", **{
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": MIRROR_USER,
                "sasl.password": MIRROR_PASSWORD})
            if sum(len(v) for v in held.values()) >= 50 or time.monotonic() > deadline:
                break
            await asyncio.sleep(1)
        assert held == {0: [f"v{i}".encode() for i in range(50)]}
    finally:
        workers.close()
        print(workers.logs()[-6000:])
