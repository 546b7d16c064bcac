"""The Spark backend's pure parts: settings, Java check, master check, Kafka options, librdkafka settings,
progress output and the job contract's registration. No Spark is started, no Kafka is used."""

from __future__ import annotations

import io
import logging
import socket

import pytest

from mirrorline.api import ConfigError, Job, hookimpl
from mirrorline.plugins import PluginRegistry
from mirrorline.spark.artifacts import artifact_name
from mirrorline.spark.errors import SparkUnavailable
from mirrorline.spark.kafka import kafka_options, offsets_json
from mirrorline.spark.producer_settings import librdkafka_settings
from mirrorline.spark.progress import LoggedProgress, make_progress
from mirrorline.spark.session import check_master, java_major, session_settings


def test_java_major_reads_old_and_new_version_strings():
    assert java_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert java_major('java version "1.8.0_402"') == 8
    assert java_major('openjdk version "21" 2023-09-19') == 21
    assert java_major("garbage") is None


def test_session_settings_pass_spark_keys_add_jars_and_force_no_speculation(tmp_path):
    jar = tmp_path / "spark-sql-kafka-0-10_2.13-4.2.0.jar"
    conf = session_settings({"spark.master": "spark://h:7077", "spark.executor.memory": "2g",
                             "spark.speculation": "true", "bootstrap.servers": "x:9092",
                             "spark.jars": "/opt/extra.jar"}, [jar])
    assert conf["spark.master"] == "spark://h:7077" and conf["spark.executor.memory"] == "2g"
    assert conf["spark.speculation"] == "false"
    assert conf["spark.jars"] == f"{jar},/opt/extra.jar"
    assert "bootstrap.servers" not in conf
    assert session_settings({}, [])["spark.master"] == "local[*]"


def test_unreachable_master_is_one_line():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(SparkUnavailable, match=rf"Spark master spark://127.0.0.1:{port} is unreachable"):
            check_master(f"spark://127.0.0.1:{port}", timeout=2)
    check_master("local[2]")  # not checked
    check_master("k8s://https://example:6443")


def test_artifact_names_strip_versions():
    assert artifact_name("lz4-java-1.11.0.jar") == "lz4-java"
    assert artifact_name("spark-sql-kafka-0-10_2.13-4.2.0.jar") == "spark-sql-kafka-0-10_2.13"
    assert artifact_name("kafka-clients-3.9.2.jar") == "kafka-clients"


def test_kafka_options_keep_connection_and_security_only():
    options = kafka_options({"bootstrap.servers": "a:9092", "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "PLAIN", "sasl.jaas.config": "x", "ssl.truststore.location": "/t",
                             "group.id": "g", "auto.offset.reset": "latest", "key.deserializer": "k"})
    assert options == {"kafka.bootstrap.servers": "a:9092", "kafka.security.protocol": "SASL_SSL",
                       "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": "x",
                       "kafka.ssl.truststore.location": "/t"}
    assert offsets_json({("t", 1): 5, ("t", 0): 3, ("u", 0): 9}) == '{"t": {"0": 3, "1": 5}, "u": {"0": 9}}'


def test_librdkafka_settings_translate_sasl_and_pem(tmp_path):
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    settings = librdkafka_settings({
        "bootstrap.servers": "a:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="s3cret";',
        "ssl.truststore.location": str(pem), "ssl.endpoint.identification.algorithm": "", "acks": "1"})
    assert settings["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (settings["sasl.username"], settings["sasl.password"]) == ("alice", "s3cret")
    assert settings["ssl.ca.location"] == str(pem)
    assert settings["ssl.endpoint.identification.algorithm"] == "none"
    assert settings["enable.idempotence"] == "true" and settings["acks"] == "all"  # order and no duplicates
    jks = tmp_path / "trust.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed")
    with pytest.raises(ConfigError, match="ssl.truststore.password: cannot read truststore .*not a valid JKS store"):
        librdkafka_settings({"bootstrap.servers": "a:9093", "security.protocol": "SSL",
                             "ssl.truststore.location": str(jks)})


def test_progress_logs_when_not_a_terminal(caplog):
    logger = logging.getLogger("mirrorline.job.test")
    progress = make_progress(1000, "records", "copy", logger, stream=io.StringIO())
    assert isinstance(progress, LoggedProgress)
    with caplog.at_level(logging.INFO, logger="mirrorline.job.test"):
        with progress:
            progress.update(250)
            progress.update(1000)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("copy: 250/1000 records (25%)")
    assert lines[-1].startswith("copy: 1000/1000 records (100%)") and "records/s" in lines[-1]


class _Echo(Job):
    """A third-party job: registered by a plugin object, listed with the built-in ones."""

    name = "echo"
    description = "says hello"

    async def run(self, context):
        return {"hello": context.config.originals.get("who", "world")}


class _Plugin:
    @hookimpl
    def register_jobs(self):
        return [_Echo, object]


def test_jobs_register_through_the_hook_and_bad_entries_are_reported():
    registry = PluginRegistry.discover(extra_plugins=(_Plugin(),))
    jobs = registry.jobs()
    assert jobs["echo"] is _Echo
    assert "backfill" in jobs  # the built-in one, from mirrorline.connectors.mm2
    assert any("is not a Job subclass" in f.error for f in registry.failures)


def test_progress_is_a_rich_bar_on_a_terminal():
    from mirrorline.spark.progress import RichProgress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    progress = make_progress(1000, "records", "backfill A->B", logging.getLogger("x"), stream=screen)
    assert isinstance(progress, RichProgress)
    progress.update(400)
    progress.update(1000)
    progress.close()
    text = screen.getvalue()
    assert "backfill A->B" in text and "1000/1000" in text and "records/s" in text and "ETA" in text


def test_progress_total_can_grow_as_work_is_planned(caplog):
    logger = logging.getLogger("mirrorline.job.grow")
    progress = make_progress(0, "tasks", "match", logger, stream=io.StringIO())
    with caplog.at_level(logging.INFO, logger="mirrorline.job.grow"):
        with progress:
            progress.update(3, 12)
            progress.update(12, 30)
            progress.update(30, 30)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("match: 3/12 tasks (25%)")
    assert lines[-1].startswith("match: 30/30 tasks (100%)")


@pytest.mark.parametrize("trust, keys", [("truststore_jks", "client_keystore_jks"),
                                         ("truststore_p12", "client_keystore_p12")])
def test_librdkafka_settings_read_jks_and_pkcs12_stores_like_every_client(tmp_path, trust, keys):
    """The backfill writer takes the Java stores other clients take: handed to librdkafka as inline PEM,
    which librdkafka accepts (it checks them when the producer is made)."""
    from confluent_kafka import Producer
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    from mirrorline.localkafka.tls import write_tls_material

    tls = write_tls_material(tmp_path, "store-pw", client_name="writer")
    settings = librdkafka_settings({
        "bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL",
        "ssl.truststore.location": str(getattr(tls, trust)), "ssl.truststore.password": "store-pw",
        "ssl.keystore.location": str(getattr(tls, keys)), "ssl.keystore.password": "store-pw",
        "ssl.keystore.type": "PKCS12" if keys.endswith("p12") else "JKS"})
    ca = x509.load_pem_x509_certificate(tls.ca_pem.read_bytes())
    assert x509.load_pem_x509_certificates(settings["ssl.ca.pem"].encode()) == [ca]
    chain = x509.load_pem_x509_certificates(settings["ssl.certificate.pem"].encode())
    assert chain[0].subject.rfc4514_string().startswith("CN=writer,")
    key = serialization.load_pem_private_key(settings["ssl.key.pem"].encode(), None)
    assert key.public_key().public_numbers() == chain[0].public_key().public_numbers()
    assert "ssl.keystore.location" not in settings and "ssl.truststore.location" not in settings
    Producer(settings).flush(0)  # librdkafka parses and loads the PEM here; a bad one raises
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.password: wrong password"):
        librdkafka_settings({"bootstrap.servers": "a:1", "security.protocol": "SSL",
                             "ssl.keystore.location": str(getattr(tls, keys)), "ssl.keystore.password": "nope"})
