"""client_kwargs with Java's TLS and SASL settings, against stores made by mirrorline.localkafka.tls."""

from __future__ import annotations

import importlib.util
import ssl
from pathlib import Path

import pytest

from mirrorline.connectors.mirror_client.config import client_props
from mirrorline.connectors.mm2.mm2_config import MirrorMakerConfig
from mirrorline.api import ConfigError, Password
from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.localkafka.tls import make_ca, write_tls_material

STORE_PASSWORD = "store-pw-1"
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="mirror" password="scram-pw";')


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """CA, server and client stores in PEM, PKCS12 and JKS, all protected by STORE_PASSWORD."""
    return write_tls_material(tmp_path_factory.mktemp("tls"), STORE_PASSWORD, client_name="mirror")


def _context(props: dict) -> ssl.SSLContext:
    kwargs, ignored = client_kwargs({"security.protocol": "SSL", **props}, "consumer")
    assert ignored == [], ignored
    return kwargs["ssl_context"]


def _ca_subjects(context: ssl.SSLContext) -> list:
    return [dict(part[0] for part in cert["subject"])["commonName"] for cert in context.get_ca_certs()]


@pytest.mark.parametrize("store, store_type", [
    ("truststore_jks", None), ("truststore_jks", "JKS"), ("truststore_p12", "PKCS12"),
    ("truststore_p12", None),  # Java reads PKCS12 with the default type JKS too (keystore.type.compat)
    ("truststore_jks", "PKCS12"),
    ("ca_pem", "PEM"), ("ca_pem", None),  # a PEM file with no type: documented mirrorline leniency
])
def test_truststores(tls, store, store_type):
    props = {"ssl.truststore.location": str(getattr(tls, store)), "ssl.truststore.password": STORE_PASSWORD}
    if store_type:
        props["ssl.truststore.type"] = store_type
    context = _context(props)
    assert _ca_subjects(context) == ["mirrorline test CA"]
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED


def test_jks_truststore_without_password_skips_the_integrity_check_as_java_does(tls):
    assert _ca_subjects(_context({"ssl.truststore.location": str(tls.truststore_jks)})) == ["mirrorline test CA"]


def test_inline_pem_truststore(tls):
    context = _context({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": tls.ca_pem.read_text()})
    assert _ca_subjects(context) == ["mirrorline test CA"]


@pytest.mark.parametrize("store, extra", [
    ("client_keystore_jks", {}),
    ("client_keystore_p12", {"ssl.keystore.type": "PKCS12"}),
    ("client_keystore_pem", {"ssl.keystore.type": "PEM", "ssl.key.password": STORE_PASSWORD}),
])
def test_keystores_give_the_client_certificate(tls, store, extra):
    _context({"ssl.truststore.location": str(tls.truststore_jks), "ssl.truststore.password": STORE_PASSWORD,
              "ssl.keystore.location": str(getattr(tls, store)), "ssl.keystore.password": STORE_PASSWORD,
              **extra})


def test_jks_key_with_its_own_password(tmp_path):
    from mirrorline.localkafka.tls import issue, write_jks_keystore

    ca = make_ca()
    path = write_jks_keystore(tmp_path / "k.jks", issue(ca, "c", server=False), STORE_PASSWORD, "key-pw-2")
    base = {"ssl.keystore.location": str(path), "ssl.keystore.password": STORE_PASSWORD}
    _context({**base, "ssl.key.password": "key-pw-2"})
    with pytest.raises(ConfigError, match=r"^ssl\.keystore\.password: cannot decrypt the private key in keystore .*"
                                          r"set ssl\.key\.password"):
        _context(base)
    with pytest.raises(ConfigError) as error:
        _context({**base, "ssl.key.password": "wrong-key-pw"})
    assert str(error.value) == f"ssl.key.password: wrong password for the private key in keystore {path}"


def test_keystore_key_file_leaves_nothing_behind(tls, tmp_path, monkeypatch):
    """The key passes through a private temporary file that is gone once loaded."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    _context({"ssl.keystore.location": str(tls.client_keystore_p12), "ssl.keystore.password": STORE_PASSWORD})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("settings, expected", [
    ({"ssl.truststore.location": "{dir}/truststore.jks", "ssl.truststore.password": "wrong-one"},
     "ssl.truststore.password: wrong password for truststore {dir}/truststore.jks"),
    ({"ssl.truststore.location": "{dir}/truststore.p12", "ssl.truststore.password": "wrong-one",
      "ssl.truststore.type": "PKCS12"},
     "ssl.truststore.password: wrong password for truststore {dir}/truststore.p12 (or not a JKS/PKCS12 file)"),
    ({"ssl.truststore.location": "/x/y.jks", "ssl.truststore.password": "wrong-one"},
     "ssl.truststore.location: file /x/y.jks does not exist"),
    ({"ssl.keystore.location": "{dir}/client.jks", "ssl.keystore.password": "wrong-one"},
     "ssl.keystore.password: wrong password for keystore {dir}/client.jks"),
    ({"ssl.keystore.location": "{dir}/client.p12", "ssl.keystore.password": "wrong-one"},
     "ssl.keystore.password: wrong password for keystore {dir}/client.p12 (or not a JKS/PKCS12 file)"),
    ({"ssl.keystore.location": "{dir}/client.pem", "ssl.keystore.type": "PEM", "ssl.key.password": "wrong-one"},
     "ssl.key.password: wrong password for the private key in keystore {dir}/client.pem"),
    ({"ssl.keystore.location": "{dir}/client.pem", "ssl.keystore.type": "PEM"},
     "ssl.key.password: required, the private key in keystore {dir}/client.pem is encrypted"),
    ({"ssl.truststore.location": "{dir}/client.p12", "ssl.truststore.type": "PEM"},
     "ssl.truststore.type: PEM, but {dir}/client.p12 is not a PEM file"),
    ({"ssl.truststore.location": "{dir}/ca.pem", "ssl.truststore.type": "BCFKS"},
     "ssl.truststore.type: BCFKS is not supported; use JKS, PKCS12 or PEM"),
    ({"ssl.endpoint.identification.algorithm": "wrong-one"},
     "ssl.endpoint.identification.algorithm: 'wrong-one' is not supported; use https (check the host name) "
     "or an empty value (do not)"),
])
def test_bad_stores_are_one_line_naming_the_setting_never_the_password(tls, settings, expected):
    props = {k: v.format(dir=tls.directory) for k, v in settings.items()}
    with pytest.raises(ConfigError) as error:
        _context(props)
    message = str(error.value)
    assert message == expected.format(dir=tls.directory)
    assert STORE_PASSWORD not in message and ("wrong-one" not in message or "algorithm" in message)


def test_hostname_check_can_be_turned_off_but_the_chain_is_still_verified(tls):
    context = _context({"ssl.truststore.location": str(tls.ca_pem), "ssl.endpoint.identification.algorithm": ""})
    assert not context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED


def test_enabled_protocols(tls):
    context = _context({"ssl.enabled.protocols": "TLSv1.3"})
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ConfigError, match=r"^ssl\.enabled\.protocols: unknown protocol\(s\) SSLV3"):
        _context({"ssl.enabled.protocols": "SSLv3"})


def test_no_truststore_means_the_system_cas(tls):
    assert _context({}).verify_mode == ssl.CERT_REQUIRED


# ------------------------------------------------------------------------------------- SASL

@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_ssl_with_scram_and_a_jks_truststore(tls, mechanism):
    kwargs, ignored = client_kwargs({
        "bootstrap.servers": "127.0.0.1:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
        "sasl.jaas.config": SCRAM_JAAS, "ssl.truststore.location": str(tls.truststore_jks),
        "ssl.truststore.password": Password(STORE_PASSWORD)}, "admin")
    assert ignored == []
    assert (kwargs["security_protocol"], kwargs["sasl_mechanism"]) == ("SASL_SSL", mechanism)
    assert (kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == ("mirror", "scram-pw")
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)


def test_password_objects_are_read(tls):
    kwargs, _ = client_kwargs({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                               "sasl.jaas.config": Password(SCRAM_JAAS)}, "producer")
    assert kwargs["sasl_plain_password"] == "scram-pw"


@pytest.mark.parametrize("props, expected", [
    ({"security.protocol": "SASL_SSH"}, "security.protocol: SASL_SSH is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, "
                                        "SASL_SSL"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": SCRAM_JAAS},
     "sasl.mechanism: OAUTHBEARER is not supported"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512"},
     "sasl.jaas.config: required with sasl.mechanism=SCRAM-SHA-512"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
      "sasl.jaas.config": SCRAM_JAAS.rstrip(";")}, "sasl.jaas.config: invalid JAAS configuration at character"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required password="scram-pw";'},
     "sasl.jaas.config: PlainLoginModule needs the option(s) username"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": 'com.example.Other required password="scram-pw";'},
     "sasl.jaas.config: login module com.example.Other cannot log in with sasl.mechanism=PLAIN"),
])
def test_bad_sasl_settings(props, expected):
    with pytest.raises(ConfigError) as error:
        client_kwargs(props, "consumer")
    assert str(error.value).startswith(expected), str(error.value)
    assert "scram-pw" not in str(error.value) and "\n" not in str(error.value)


def test_sasl_without_a_mechanism_is_gssapi_as_in_java():
    if importlib.util.find_spec("gssapi") is not None:
        pytest.skip("gssapi is installed")
    with pytest.raises(ConfigError, match=r"^sasl\.mechanism: GSSAPI \(Kafka's default"):
        client_kwargs({"security.protocol": "SASL_SSL", "sasl.jaas.config": SCRAM_JAAS}, "admin")


# --------------------------------------------------------------------- layering of settings

def test_mm2_cluster_settings_reach_every_client_of_a_flow(tls):
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "a:9093", "A.security.protocol": "SASL_SSL", "A.sasl.mechanism": "SCRAM-SHA-512",
        "A.sasl.jaas.config": SCRAM_JAAS, "A.ssl.truststore.location": str(tls.truststore_jks),
        "A.ssl.truststore.password": STORE_PASSWORD,
        "B.bootstrap.servers": "b:9093", "B.security.protocol": "SSL",
        "B.ssl.truststore.location": str(tls.truststore_p12), "B.ssl.truststore.type": "PKCS12",
        "B.ssl.truststore.password": STORE_PASSWORD,
        "B.ssl.keystore.location": str(tls.client_keystore_jks), "B.ssl.keystore.password": STORE_PASSWORD,
        "A->B.enabled": "true",
        # a flow override of the source consumer's settings wins over the cluster's
        "A->B.source.consumer.sasl.mechanism": "SCRAM-SHA-256",
    }
    config = MirrorMakerConfig(props)
    connector = config.connector_config("A", "B", "MirrorSourceConnector")
    for role in ("consumer", "producer", "admin"):
        source, _ = client_kwargs(client_props(connector, "source", role), role)
        assert source["security_protocol"] == "SASL_SSL" and source["sasl_plain_username"] == "mirror"
        assert source["sasl_mechanism"] == ("SCRAM-SHA-256" if role == "consumer" else "SCRAM-SHA-512")
        assert isinstance(source["ssl_context"], ssl.SSLContext)
        target, _ = client_kwargs(client_props(connector, "target", role), role)
        assert target["security_protocol"] == "SSL" and "sasl_mechanism" not in target
    worker = config.worker_config("A", "B")  # internal stores, group membership, task producers: B's settings
    for role in ("producer", "consumer", "admin"):
        scoped = {k[len(role) + 1:]: v for k, v in worker.items() if k.startswith(f"{role}.")}
        kwargs, _ = client_kwargs({"bootstrap.servers": worker["bootstrap.servers"], **scoped}, role)
        assert kwargs["security_protocol"] == "SSL" and isinstance(kwargs["ssl_context"], ssl.SSLContext)
    kwargs, _ = client_kwargs({k: v for k, v in worker.items() if not k.startswith(("producer.", "consumer.",
                                                                                  "admin."))}, "consumer")
    assert kwargs["security_protocol"] == "SSL"


def test_connect_style_prefixes_layer_for_one_connector(tls):
    connector = {
        "source.cluster.bootstrap.servers": "a:9093", "source.cluster.security.protocol": "SASL_SSL",
        "source.cluster.sasl.mechanism": "PLAIN", "source.cluster.sasl.jaas.config": SCRAM_JAAS,
        "source.cluster.ssl.truststore.location": str(tls.ca_pem),
        "consumer.sasl.mechanism": "SCRAM-SHA-256", "source.consumer.sasl.mechanism": "SCRAM-SHA-512",
        "target.cluster.bootstrap.servers": "b:9092",
    }
    consumer, _ = client_kwargs(client_props(connector, "source", "consumer"), "consumer")
    admin, _ = client_kwargs(client_props(connector, "source", "admin"), "admin")
    assert consumer["sasl_mechanism"] == "SCRAM-SHA-512" and admin["sasl_mechanism"] == "PLAIN"
    target, _ = client_kwargs(client_props(connector, "target", "admin"), "admin")
    assert "security_protocol" not in target and "ssl_context" not in target
    assert Path(tls.ca_pem).exists()
