"""Unit tests of mirrorline.clients.kafka_clients.client_kwargs: Java client settings to aiokafka arguments."""

from __future__ import annotations

import inspect
import ssl

import aiokafka
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from mirrorline.api import ConfigError
from mirrorline.clients.kafka_clients import client_kwargs

CLIENT_CLASSES = {"producer": aiokafka.AIOKafkaProducer, "consumer": aiokafka.AIOKafkaConsumer,
                  "admin": AIOKafkaAdminClient}

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="alice" password="s3cr=t";')


# ---------------------------------------------------------------------------------------
# Producer
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [("all", "all"), ("-1", "all"), (" all ", "all"), ("1", 1), ("0", 0),
                                           (1, 1), (-1, "all")])
def test_acks(raw, expected):
    kwargs, ignored = client_kwargs({"acks": raw}, "producer")
    assert kwargs == {"acks": expected}
    assert ignored == []


@pytest.mark.parametrize("raw, expected", [("none", None), ("gzip", "gzip"), ("snappy", "snappy"),
                                           ("lz4", "lz4"), ("zstd", "zstd")])
def test_compression(raw, expected):
    kwargs, _ = client_kwargs({"compression.type": raw}, "producer")
    assert kwargs == {"compression_type": expected}


def test_producer_settings():
    kwargs, ignored = client_kwargs({
        "bootstrap.servers": "a:9092,b:9092",
        "client.id": "mirror-producer",
        "linger.ms": "5",
        "batch.size": "32768",
        "max.request.size": "1048576",
        "enable.idempotence": "true",
        "transactional.id": "tx-1",
        "transaction.timeout.ms": "60000",
        "request.timeout.ms": "30000",
        "retry.backoff.ms": "100",
        "metadata.max.age.ms": "300000",
        "connections.max.idle.ms": "540000",
    }, "producer")
    assert kwargs == {
        "bootstrap_servers": "a:9092,b:9092",
        "client_id": "mirror-producer",
        "linger_ms": 5,
        "max_batch_size": 32768,
        "max_request_size": 1048576,
        "enable_idempotence": True,
        "transactional_id": "tx-1",
        "transaction_timeout_ms": 60000,
        "request_timeout_ms": 30000,
        "retry_backoff_ms": 100,
        "metadata_max_age_ms": 300000,
        "connections_max_idle_ms": 540000,
    }
    assert ignored == []


@pytest.mark.parametrize("raw, expected", [("true", True), ("TRUE", True), (" true", True), ("false", False),
                                           ("no", False)])
def test_boolean_settings(raw, expected):
    kwargs, _ = client_kwargs({"enable.idempotence": raw}, "producer")
    assert kwargs["enable_idempotence"] is expected


def test_ignored_keys_reported_sorted():
    kwargs, ignored = client_kwargs({
        "bootstrap.servers": "a:9092",
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "send.buffer.bytes": "131072",
        "group.id": "not-for-a-producer",
        "ssl.truststore.password": "changeit",
    }, "producer")
    assert kwargs == {"bootstrap_servers": "a:9092"}
    assert ignored == ["group.id", "key.serializer", "send.buffer.bytes"]  # ssl.* are read (unused without TLS)


def test_buffer_memory_is_kept_for_the_source_task():
    kwargs, ignored = client_kwargs({"buffer.memory": "1048576"}, "producer")
    assert kwargs == {"buffer_memory": 1048576} and ignored == []


# ---------------------------------------------------------------------------------------
# Consumer and admin
# ---------------------------------------------------------------------------------------

def test_consumer_settings():
    kwargs, ignored = client_kwargs({
        "bootstrap.servers": "a:9092",
        "group.id": "g",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
        "auto.commit.interval.ms": "1000",
        "fetch.max.wait.ms": "500",
        "fetch.min.bytes": "1",
        "fetch.max.bytes": "52428800",
        "max.partition.fetch.bytes": "1048576",
        "max.poll.records": "500",
        "max.poll.interval.ms": "300000",
        "session.timeout.ms": "45000",
        "heartbeat.interval.ms": "3000",
        "isolation.level": "read_committed",
        "client.rack": "rack-1",
        "check.crcs": "true",
        "acks": "all",
        "linger.ms": "5",
    }, "consumer")
    assert kwargs == {
        "bootstrap_servers": "a:9092",
        "group_id": "g",
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "auto_commit_interval_ms": 1000,
        "fetch_max_wait_ms": 500,
        "fetch_min_bytes": 1,
        "fetch_max_bytes": 52428800,
        "max_partition_fetch_bytes": 1048576,
        "max_poll_records": 500,
        "max_poll_interval_ms": 300000,
        "session_timeout_ms": 45000,
        "heartbeat_interval_ms": 3000,
        "isolation_level": "read_committed",
        "client_rack": "rack-1",
        "check_crcs": True,
    }
    assert ignored == ["acks", "linger.ms"]  # producer settings mean nothing to a consumer


def test_admin_takes_only_common_settings():
    kwargs, ignored = client_kwargs({
        "bootstrap.servers": "a:9092",
        "client.id": "admin",
        "request.timeout.ms": "10000",
        "acks": "all",
        "group.id": "g",
        "compression.type": "none",
    }, "admin")
    assert kwargs == {"bootstrap_servers": "a:9092", "client_id": "admin", "request_timeout_ms": 10000}
    assert ignored == ["acks", "compression.type", "group.id"]


def test_empty_props():
    for role in CLIENT_CLASSES:
        assert client_kwargs({}, role) == ({}, [])


# Every setting client_kwargs knows, for checking the output against aiokafka's signatures.
ALL_SETTINGS = {
    "bootstrap.servers": "a:9092", "client.id": "c", "request.timeout.ms": "1", "retry.backoff.ms": "1",
    "metadata.max.age.ms": "1", "connections.max.idle.ms": "1", "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN", "sasl.kerberos.service.name": "kafka", "sasl.jaas.config": PLAIN_JAAS,
    "acks": "all", "compression.type": "none", "batch.size": "1", "linger.ms": "1", "max.request.size": "1",
    "enable.idempotence": "true", "transactional.id": "t", "transaction.timeout.ms": "1", "group.id": "g",
    "auto.offset.reset": "earliest", "enable.auto.commit": "false", "auto.commit.interval.ms": "1",
    "fetch.max.wait.ms": "1", "fetch.min.bytes": "1", "fetch.max.bytes": "1", "max.partition.fetch.bytes": "1",
    "max.poll.records": "1", "max.poll.interval.ms": "1", "session.timeout.ms": "1",
    "heartbeat.interval.ms": "1", "isolation.level": "read_committed", "client.rack": "r", "check.crcs": "true",
    "ssl.endpoint.identification.algorithm": "",
}


@pytest.mark.parametrize("role", sorted(CLIENT_CLASSES))
def test_every_kwarg_is_accepted_by_aiokafka(role):
    kwargs, ignored = client_kwargs(ALL_SETTINGS, role)
    parameters = inspect.signature(CLIENT_CLASSES[role]).parameters
    assert set(kwargs) <= set(parameters), set(kwargs) - set(parameters)
    assert "sasl.jaas.config" not in ignored
    assert set(kwargs).isdisjoint(ignored)


@pytest.mark.parametrize("role", sorted(CLIENT_CLASSES))
async def test_aiokafka_clients_construct_from_kwargs(role):
    """aiokafka accepts every value (not only every name) and will connect with these settings."""
    kwargs, _ = client_kwargs(ALL_SETTINGS, role)
    client = CLIENT_CLASSES[role](**kwargs)  # no connection is made before start()
    try:
        connection = client.client if role == "producer" else client._client
        assert connection._bootstrap_servers == "a:9092"
        assert connection._client_id == "c"
        assert connection._request_timeout_ms == 1
        assert connection._security_protocol == "SASL_SSL"
        assert connection._ssl_context is kwargs["ssl_context"]
        assert (connection._sasl_mechanism, connection._sasl_plain_username,
                connection._sasl_plain_password) == ("PLAIN", "alice", "s3cr=t")
    finally:
        await client.close() if role == "admin" else await client.stop()


# ---------------------------------------------------------------------------------------
# SASL
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("jaas, username, password", [
    (PLAIN_JAAS, "alice", "s3cr=t"),
    ('org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="pw";',
     "bob", "pw"),
    ('org.apache.kafka.common.security.plain.PlainLoginModule required\n  username = "carol"\n'
     '  password = "p w";', "carol", "p w"),
    ('org.apache.kafka.common.security.plain.PlainLoginModule required password="first" username="dave";',
     "dave", "first"),
    ('org.apache.kafka.common.security.plain.PlainLoginModule required username="" password="";', "", ""),
])
def test_sasl_jaas_username_password(jaas, username, password):
    for role in CLIENT_CLASSES:
        kwargs, ignored = client_kwargs({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                         "sasl.jaas.config": jaas}, role)
        assert kwargs["sasl_plain_username"] == username
        assert kwargs["sasl_plain_password"] == password
        assert kwargs["sasl_mechanism"] == "PLAIN"
        assert kwargs["security_protocol"] == "SASL_PLAINTEXT"
        assert "ssl_context" not in kwargs
        assert ignored == []


def test_sasl_jaas_without_credentials_is_ignored():
    jaas = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
    kwargs, ignored = client_kwargs({"sasl.jaas.config": jaas, "sasl.mechanism": "OAUTHBEARER"}, "producer")
    assert "sasl_plain_username" not in kwargs and "sasl_plain_password" not in kwargs
    assert ignored == ["sasl.jaas.config"]


# ---------------------------------------------------------------------------------------
# TLS
# ---------------------------------------------------------------------------------------

def _sasl_for(protocol: str) -> dict[str, str]:
    """A complete SASL login for SASL protocols (without one, Java's default mechanism is GSSAPI)."""
    return {"sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS} if protocol.startswith("SASL_") else {}


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_ssl_context_with_hostname_check_disabled(protocol):
    kwargs, ignored = client_kwargs({"security.protocol": protocol, **_sasl_for(protocol),
                                     "ssl.endpoint.identification.algorithm": ""}, "producer")
    context = kwargs["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname is False
    assert context.verify_mode == ssl.CERT_REQUIRED  # the certificate is still verified
    assert kwargs["security_protocol"] == protocol
    assert ignored == []


@pytest.mark.parametrize("props", [
    {"security.protocol": "SSL"},
    {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "https"},
])
def test_ssl_context_checks_hostnames_by_default(props):
    kwargs, _ = client_kwargs(props, "consumer")
    assert kwargs["ssl_context"].check_hostname is True
    assert kwargs["ssl_context"].verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize("protocol", ["ssl", "Sasl_Ssl"])
def test_security_protocol_is_case_insensitive(protocol):
    # Java upper-cases security.protocol; aiokafka accepts only the upper-case names
    kwargs, _ = client_kwargs({"security.protocol": protocol, **_sasl_for(protocol.upper())}, "admin")
    assert kwargs["security_protocol"] == protocol.upper()
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SASL_PLAINTEXT", None])
def test_no_ssl_context_without_tls(protocol):
    props = {"ssl.endpoint.identification.algorithm": ""}
    if protocol:
        props.update({"security.protocol": protocol, **_sasl_for(protocol)})
    kwargs, ignored = client_kwargs(props, "producer")
    assert "ssl_context" not in kwargs
    assert ignored == []  # TLS settings are understood, even when unused


def test_ssl_settings_never_reported_as_ignored():
    _, ignored = client_kwargs({"security.protocol": "PLAINTEXT", "ssl.cafile": "/nonexistent/ca.pem",
                                "ssl.truststore.location": "/nonexistent/ca.pem",
                                "ssl.keystore.location": "/nonexistent/cert.pem",
                                "ssl.certfile": "/nonexistent/cert.pem", "ssl.keyfile": "/nonexistent/key.pem",
                                "ssl.key.password": "pw"}, "producer")
    assert ignored == []


def test_missing_cafile_fails_loudly():
    with pytest.raises(ConfigError, match=r"^ssl\.cafile: file /nonexistent/ca\.pem does not exist$"):
        client_kwargs({"security.protocol": "SSL", "ssl.cafile": "/nonexistent/ca.pem"}, "producer")
