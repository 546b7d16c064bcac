"""``mirrorline mm2`` between two SASL_SSL clusters, configured exactly as a MirrorMaker 2 user would.

Clusters ``SA`` and ``SB`` (started by this module through the session's LocalKafka) have a
SASL_SSL client listener (PLAIN and SCRAM-SHA-256/512) with a certificate from their own test
CA, and Kafka's ACL authorizer. The mirror logs in as ``mirror`` with SCRAM-SHA-512. ``mirror``
is a super user here: what the mirror needs from ACLs is exercised by test_unreadable_topic.py,
this module is about TLS and SASL settings reaching every client (workers, internal stores,
group membership, connectors, the failover command).

SA's truststore is given as JKS (the Java default type), SB's as PKCS12.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from mirrorline.connectors.mirror_client.formats import Heartbeat
from mirrorline.localkafka.cluster import SINGLE_BROKER_MM2_PROPERTIES
from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.localkafka.cluster import TLS_PASSWORD
from support.kafka import commit_on
from support.kafka import KEEP_OLD_RECORDS, produce, record_tuples

pytestmark = pytest.mark.integration

MIRROR_USER = "mirror"
MIRROR_PASSWORD = "mirror-scram-secret"
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              f'username="{MIRROR_USER}" password="{{password}}";')
PARTITIONS = 2
PER_PARTITION = 60


@pytest.fixture(scope="module")
def secured(local_kafka):
    """``{"SA": spec, "SB": spec}``: two SASL_SSL clusters with SCRAM users and the ACL authorizer."""
    names = ["SA", "SB"]
    try:
        clusters = local_kafka.start(names, sasl_users={MIRROR_USER: MIRROR_PASSWORD}, authorizer=True,
                                     tls=True, scram=True, super_users=[MIRROR_USER])
        yield {c.spec.name: c.spec for c in clusters}
    finally:
        local_kafka.stop(names)


def _kwargs(spec, role: str) -> dict:
    """aiokafka arguments reaching ``spec`` as its admin user (PLAIN over SASL_SSL)."""
    kwargs, ignored = client_kwargs(spec.client_properties(), role)
    assert ignored == [], ignored
    return kwargs


async def _create_topic(spec, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(**_kwargs(spec, "admin"))
    await admin.start()
    try:
        response = await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=KEEP_OLD_RECORDS)])
        assert all(err[1] == 0 for err in response.topic_errors), response.topic_errors
    finally:
        await admin.close()


async def _topics(spec) -> set[str]:
    admin = AIOKafkaAdminClient(**_kwargs(spec, "admin"))
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def _partitions(spec, topic: str) -> list[int]:
    """Partition ids of ``topic`` (empty when it does not exist; never creates it)."""
    admin = AIOKafkaAdminClient(**_kwargs(spec, "admin"))
    await admin.start()
    try:
        described = await admin.describe_topics()
    finally:
        await admin.close()
    return next((sorted(p["partition"] for p in entry["partitions"]) for entry in described
                 if entry["topic"] == topic and entry["error_code"] == 0), [])


async def _group_offsets(spec, group: str) -> dict[TopicPartition, int]:
    admin = AIOKafkaAdminClient(**_kwargs(spec, "admin"))
    await admin.start()
    try:
        return {tp: om.offset for tp, om in (await admin.list_consumer_group_offsets(group)).items()
                if om.offset >= 0}
    finally:
        await admin.close()


async def _read(spec, topic: str, expect: int, timeout: float = 90.0) -> dict[int, list]:
    """Every record of ``topic`` once it holds ``expect`` records, by partition."""
    consumer = AIOKafkaConsumer(**_kwargs(spec, "consumer"), enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while True:
            tps = [TopicPartition(topic, p) for p in await _partitions(spec, topic)]
            ends = await consumer.end_offsets(tps) if tps else {}
            if tps and sum(ends.values()) >= expect:
                break
            assert loop.time() < deadline, f"{topic} on {spec.name}: {sum(ends.values())} of {expect} records"
            await asyncio.sleep(0.5)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out: dict[int, list] = {tp.partition: [] for tp in tps}
        remaining = {tp for tp in tps if ends[tp] > 0}
        while remaining:
            assert loop.time() < deadline + timeout, f"reading {topic} on {spec.name} timed out"
            for tp, records in (await consumer.getmany(*remaining, timeout_ms=1000)).items():
                out[tp.partition].extend(r for r in records if r.offset < ends[tp])
                if records and records[-1].offset >= ends[tp] - 1:
                    remaining.discard(tp)
        return out
    finally:
        await consumer.stop()



async def _commit(spec, group: str, offsets: dict[TopicPartition, int]) -> None:
    await commit_on(spec.bootstrap_servers, group, offsets, **_kwargs(spec, "consumer"))


def _cluster_lines(alias: str, spec, *, password: str = MIRROR_PASSWORD, truststore: str | None = None,
                   truststore_type: str | None = None) -> str:
    """An MM2 user's settings for one cluster: SASL_SSL, SCRAM-SHA-512, a truststore."""
    lines = [f"{alias}.bootstrap.servers = {spec.bootstrap_servers}",
             f"{alias}.security.protocol = SASL_SSL",
             f"{alias}.sasl.mechanism = SCRAM-SHA-512",
             f"{alias}.sasl.jaas.config = {SCRAM_JAAS.format(password=password)}",
             f"{alias}.ssl.truststore.location = {truststore}",
             f"{alias}.ssl.truststore.password = {TLS_PASSWORD}"]
    if truststore_type:
        lines.append(f"{alias}.ssl.truststore.type = {truststore_type}")
    return "\n".join(lines) + "\n"


def _mm2_properties(secured, topics: str, source: str = "SA", target: str = "SB", **overrides) -> str:
    """mm2.properties for flow ``source->target`` (aliases of SA and SB); ``overrides`` per alias."""
    sa, sb = secured["SA"], secured["SB"]
    source_lines = _cluster_lines(source, sa, **{"truststore": str(sa.tls_dir / "truststore.jks"),
                                                 **overrides.get(source, {})})
    target_lines = _cluster_lines(target, sb, **{"truststore": str(sb.tls_dir / "truststore.p12"),
                                                 "truststore_type": "PKCS12", **overrides.get(target, {})})
    return f"""# MirrorMaker 2 config, in MM2's own format
clusters = {source}, {target}
{source_lines}{target_lines}
{source}->{target}.enabled = true
{source}->{target}.topics = {topics}
{source}->{target}.emit.checkpoints.interval.seconds = 1
{source}->{target}.refresh.groups.interval.seconds = 2
emit.heartbeats.interval.seconds = 1
refresh.topics.interval.seconds = 2
{SINGLE_BROKER_MM2_PROPERTIES}{target}.offset.flush.interval.ms = 500
"""


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrorline.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


async def _wait_for_checkpoints(spec, group: str, topic: str, expected: dict[int, int], timeout: float = 90) -> None:
    """Until ``SA.checkpoints.internal`` on ``spec`` holds a checkpoint of ``group`` at each expected upstream offset."""
    from mirrorline.connectors.mirror_client.formats import Checkpoint

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        seen: dict[int, int] = {}
        if "SA.checkpoints.internal" in await _topics(spec):
            consumer = AIOKafkaConsumer(**_kwargs(spec, "consumer"), enable_auto_commit=False,
                                        auto_offset_reset="earliest")
            await consumer.start()
            try:
                tp = TopicPartition("SA.checkpoints.internal", 0)
                end = (await consumer.end_offsets([tp]))[tp]
                consumer.assign([tp])
                await consumer.seek_to_beginning(tp)
                while end and await consumer.position(tp) < end:
                    for records in (await consumer.getmany(tp, timeout_ms=1000)).values():
                        for record in records:
                            checkpoint = Checkpoint.decode(record.key, record.value)
                            if checkpoint.group == group and checkpoint.topic == f"SA.{topic}":
                                seen[checkpoint.partition] = checkpoint.upstream_offset
            finally:
                await consumer.stop()
        if seen == expected:
            return
        assert loop.time() < deadline, f"checkpoints of {group}: {seen}, expected {expected}"
        await asyncio.sleep(1)


def _stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.terminate()
    return proc.wait(60)


async def test_mm2_mirrors_between_sasl_ssl_clusters_and_fails_over(secured, unique_name, tmp_path):
    sa, sb = secured["SA"], secured["SB"]
    prefix = unique_name("tls")
    topic = f"{prefix}-orders"
    await _create_topic(sa, topic, PARTITIONS)
    sent = [(i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())], 1_700_000_000_000 + i)
            for i in range(PARTITIONS * PER_PARTITION)]
    await produce(sa.bootstrap_servers, topic, sent, **{k: v for k, v in _kwargs(sa, "producer").items()
                                                       if k != "bootstrap_servers"})
    group = f"{prefix}-app"
    consumed = {TopicPartition(topic, p): 40 for p in range(PARTITIONS)}
    await _commit(sa, group, consumed)

    properties = tmp_path / "mm2.properties"
    properties.write_text(_mm2_properties(secured, f"{prefix}-.*"))
    log = tmp_path / "mm2.log"
    with open(log, "w") as output:
        proc = subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(properties)],
                                stdout=output, stderr=subprocess.STDOUT, text=True)
    try:
        mirrored = await _read(sb, f"SA.{topic}", expect=len(sent))
        for partition in range(PARTITIONS):
            assert record_tuples(mirrored[partition]) == [(k, v, h, ts) for p, k, v, h, ts in sent if p == partition]
        await _wait_for_checkpoints(sb, group, topic, {p: 40 for p in range(PARTITIONS)})
        heartbeats = await _read(sb, "SA.heartbeats", expect=1)
        decoded = [Heartbeat.decode(r.key, r.value) for records in heartbeats.values() for r in records]
        # the SB->SA flow's heartbeats, written on SA, mirrored back to SB
        assert any((h.source_cluster_alias, h.target_cluster_alias) == ("SB", "SA") for h in decoded), decoded
        assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        code = _stop(proc)
    assert code == 0, log.read_text()[-3000:]
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]

    # failover, with the same settings an operator keeps for the target cluster
    target_config = tmp_path / "sb-client.properties"
    target_config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={SCRAM_JAAS.format(password=MIRROR_PASSWORD)}\n"
        f"ssl.truststore.location={sb.tls_dir / 'truststore.p12'}\nssl.truststore.type=PKCS12\n"
        f"ssl.truststore.password={TLS_PASSWORD}\n")
    source_config = tmp_path / "sa-client.properties"
    source_config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.jaas.config={SCRAM_JAAS.format(password=MIRROR_PASSWORD)}\n"
        f"ssl.truststore.location={sa.tls_dir / 'ca.pem'}\nssl.truststore.type=PEM\n")
    common = ["--group", group, "--source", "SA", "--target-bootstrap", sb.bootstrap_servers,
              "--target-config", str(target_config), "--source-bootstrap", sa.bootstrap_servers,
              "--source-config", str(source_config)]
    translated = _cli("offsets", "translate", *common)
    assert translated.returncode == 0, translated.stdout + translated.stderr
    rows = [line.split() for line in translated.stdout.splitlines() if line.startswith(f"SA.{topic}-")]
    assert len(rows) == PARTITIONS and all(row[1] == "40" for row in rows), translated.stdout
    assert all(row[4].isdigit() for row in rows), f"re-read counts need the source:\n{translated.stdout}"
    done = _cli("failover", *common)
    assert done.returncode == 0 and f"committed {PARTITIONS} offset(s)" in done.stdout, done.stdout + done.stderr
    on_sb = await _group_offsets(sb, group)
    # translated as MM2 does (from the last offset sync at or before 40): never past the real position
    assert {tp.partition: offset for tp, offset in on_sb.items()} == {
        int(row[0].rsplit("-", 1)[1]): int(row[2]) for row in rows}
    assert all(0 < offset <= 40 for offset in on_sb.values()), on_sb


@pytest.mark.parametrize("case", ["wrong-password", "untrusted-certificate", "missing-truststore"])
async def test_bad_security_settings_stop_mm2_with_one_line_and_write_nothing(secured, unique_name, tmp_path, case):
    sa, sb = secured["SA"], secured["SB"]
    # aliases of their own: anything the run wrote would carry them (mm2-configs.XA.internal, XA.heartbeats ...)
    source, target = "XA", "XB"
    bad = {"wrong-password": {"password": "not-the-password"},
           # SB's CA: SA's certificate is not signed by it
           "untrusted-certificate": {"truststore": str(sb.tls_dir / "truststore.jks")},
           "missing-truststore": {"truststore": str(tmp_path / "nowhere" / "truststore.jks")}}[case]
    properties = tmp_path / "mm2.properties"
    properties.write_text(_mm2_properties(secured, "nothing-.*", source, target, **{source: bad}))
    result = _cli("mm2", str(properties), timeout=90)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert f"cluster {source}" in last, last
    expected = {"wrong-password": "refused the login as 'mirror' with sasl.mechanism=SCRAM-SHA-512",
                "untrusted-certificate": "is not trusted",
                "missing-truststore": f"ssl.truststore.location: file {tmp_path / 'nowhere' / 'truststore.jks'} "
                                      "does not exist"}[case]
    assert expected in last, last
    assert "not-the-password" not in result.stderr and TLS_PASSWORD not in result.stderr
    for spec in (sa, sb):
        written = {t for t in await _topics(spec) if source in t or target in t}
        assert not written, f"{spec.name}: {sorted(written)}"
