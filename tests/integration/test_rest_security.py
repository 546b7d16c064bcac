"""The REST API secured as Kafka Connect's: HTTPS listeners, Basic auth, client certificates, and
signed requests forwarded between the workers of a distributed cluster, on real brokers."""

from __future__ import annotations

import asyncio
import re
import ssl
import time

import aiohttp
import pytest

from mirrorline.rest.auth import BASIC_AUTH_EXTENSION, PROPERTY_FILE_LOGIN_MODULE, sign_request
from support.distributed import WorkerCluster
from support.worker import Rest, all_running, running_standalone

pytestmark = pytest.mark.integration

USER = ("admin", "s3cret")


@pytest.fixture
def tls(tmp_path):
    """A CA, a server identity (127.0.0.1) and a client identity, in PEM/PKCS12/JKS stores."""
    material = pytest.importorskip("mirrorline.localkafka.tls")
    return material.write_tls_material(tmp_path / "tls", "changeit", client_name="rest-client")


@pytest.fixture
def credentials(tmp_path):
    path = tmp_path / "credentials.properties"
    path.write_text(f"{USER[0]}: {USER[1]}\n")
    return path


def trusting(tls, client_certificate: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls.ca_pem))
    if client_certificate:
        context.load_cert_chain(str(tls.client_keystore_pem), password=tls.password)
    return context


def sequence(topic: str) -> dict[str, str]:
    return {"connector.class": "SequenceSource", "topic": topic, "streams": "1", "tasks.max": "1",
            "records.per.poll": "10", "poll.interval.ms": "100"}


async def test_https_with_basic_auth_standalone(cluster_a, make_topic, unique_name, tls, credentials):
    topic = await make_topic(cluster_a)
    name = unique_name("secure")
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers, "listeners": "https://127.0.0.1:0",
              "listeners.https.ssl.keystore.location": str(tls.server_keystore_p12),
              "listeners.https.ssl.keystore.password": tls.password,
              "listeners.https.ssl.keystore.type": "PKCS12",
              "rest.extension.classes": BASIC_AUTH_EXTENSION,
              "rest.basic.auth.credentials.file": str(credentials)}
    async with running_standalone(worker) as url:
        assert url.startswith("https://127.0.0.1:")
        async with Rest(url, auth=USER, ssl_context=trusting(tls)) as rest:
            status, info = await rest.call("POST", "/connectors", {"name": name, "config": sequence(topic)})
            assert status == 201, info
            await rest.wait_for(f"/connectors/{name}/status", all_running(1))
            assert (await rest.call("GET", "/metrics"))[0] == 200
        async with Rest(url, ssl_context=trusting(tls)) as anonymous:
            for path in ("/connectors", f"/connectors/{name}/status", "/metrics", "/ui"):
                status, body = await anonymous.call("GET", path)
                assert status == 401 and body["error_code"] == 401, (path, body)
            status, _ = await anonymous.call("DELETE", f"/connectors/{name}")
            assert status == 401
        async with Rest(url, auth=("admin", "wrong"), ssl_context=trusting(tls)) as wrong:
            assert (await wrong.call("GET", "/connectors"))[0] == 401
        async with Rest(url, auth=USER) as untrusted:  # the system CAs do not vouch for the test CA
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await untrusted.call("GET", "/connectors")


async def test_client_certificate_required(cluster_a, tls):
    worker = {"bootstrap.servers": cluster_a.bootstrap_servers, "listeners": "https://127.0.0.1:0",
              # the worker's ssl.* settings, as Connect falls back to them with no listeners.https.* given
              "ssl.keystore.location": str(tls.server_keystore_jks), "ssl.keystore.password": tls.password,
              "ssl.truststore.location": str(tls.truststore_p12), "ssl.truststore.password": tls.password,
              "ssl.truststore.type": "PKCS12", "ssl.client.auth": "required"}
    async with running_standalone(worker) as url:
        async with Rest(url, ssl_context=trusting(tls)) as no_certificate:
            with pytest.raises((aiohttp.ClientOSError, aiohttp.ServerDisconnectedError, ssl.SSLError)):
                await no_certificate.call("GET", "/connectors")
        async with Rest(url, ssl_context=trusting(tls, client_certificate=True)) as with_certificate:
            status, body = await with_certificate.call("GET", "/connectors")
            assert status == 200 and body == []


async def _leader_and_follower(cluster: WorkerCluster, timeout: float = 90.0):
    """(leader, follower) once both workers answer, both joined the group, and the leader has written
    the session key. (Picking the follower as "the worker that is not the leader" before it answered
    raced a slow start: on a loaded machine the second worker was still importing when the test
    sent it a request.)"""
    deadline = time.monotonic() + timeout
    while True:
        assert all(w.proc.poll() is None for w in cluster.workers), cluster.logs()
        leaders, healthy = [], []
        for worker in cluster.workers:
            try:
                async with Rest(worker.url, auth=USER) as rest:
                    status, _ = await rest.call("GET", "/health")
                    _, metrics = await rest.call("GET", "/metrics")
                if status == 200:
                    healthy.append(worker)
                if status == 200 and re.search(r'rebalance_leader\{worker_id="%s"\} 1\.0' % re.escape(worker.worker_id),
                                               metrics or ""):
                    leaders.append(worker)
            except aiohttp.ClientError:
                pass
        logs = cluster.logs()
        if len(leaders) == 1 and len(healthy) == len(cluster.workers) and "wrote a new session key" in logs \
                and all(f"Worker {w.worker_id} joined group" in logs for w in cluster.workers):
            leader = leaders[0]
            return leader, next(w for w in cluster.workers if w is not leader)
        assert time.monotonic() < deadline, f"no leader with a session key, or a worker not in the group\n{logs}"
        await asyncio.sleep(0.5)


async def test_distributed_forwarding_is_authenticated(cluster_a, make_topic, unique_name, tmp_path, credentials):
    topic = await make_topic(cluster_a)
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(f'KafkaConnect {{\n  {PROPERTY_FILE_LOGIN_MODULE} required\n  file="{credentials}";\n}};\n')
    cluster = WorkerCluster(cluster_a.bootstrap_servers, unique_name("secdist"), tmp_path,
                            {"rest.extension.classes": BASIC_AUTH_EXTENSION},
                            env={"KAFKA_OPTS": f"-Xmx256m -Djava.security.auth.login.config={jaas}"})
    try:
        cluster.add_worker()
        cluster.add_worker()
        leader, follower = await _leader_and_follower(cluster)
        name = unique_name("fwd")
        async with Rest(follower.url, auth=USER) as rest:
            status, info = await rest.call("POST", "/connectors", {"name": name, "config": sequence(topic)})
            assert status == 201, info
            status, _ = await rest.call("PUT", f"/connectors/{name}/config", {**sequence(topic), "tasks.max": "1"})
            assert status == 200
        async with Rest(leader.url, auth=USER) as rest:
            await rest.wait_for(f"/connectors/{name}/status", all_running(1), timeout=60)
        async with Rest(leader.url) as forger:
            # a "forwarded" request with neither credentials nor a signature
            status, body = await forger.call("DELETE", f"/connectors/{name}?forward=false")
            assert status == 401 and body["error_code"] == 401
            # one signed with a key that is not the cluster's
            path = f"/connectors/{name}?forward=false"
            status, _ = await forger.call("DELETE", path, headers=sign_request(b"x" * 32, "DELETE", path, b""))
            assert status == 401
        async with Rest(leader.url, auth=USER) as rest:
            status, _ = await rest.call("GET", f"/connectors/{name}")
            assert status == 200
    finally:
        cluster.close()
        print(cluster.logs()[-6000:])
