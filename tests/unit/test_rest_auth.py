"""Unit tests of REST authentication and TLS: Basic auth as Connect's extension, credentials and
JAAS files, signed forwarded requests, /metrics left open by setting, and key stores."""

from __future__ import annotations

import base64
import json
import logging
import ssl
import sys
import time
from types import SimpleNamespace

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mirrorline.api.errors import ConfigError
from mirrorline.rest import auth as auth_module
from mirrorline.rest import create_app
from mirrorline.rest.auth import (BASIC_AUTH_EXTENSION, PROPERTY_FILE_LOGIN_MODULE, SIGNATURE_HEADER, TIMESTAMP_HEADER,
                                 Credentials, RestAuth, basic_credentials, credentials_file_from_jaas,
                                 credentials_from_config, jaas_path_from_java_options, parse_credentials, parse_jaas,
                                 rest_auth_from_config, sign_request, verify_signature, warn_if_open)
from mirrorline.rest.tls import RestSslSettings, client_ssl_context, server_ssl_context, trusted_certificates_pem
from mirrorline.rest.forwarding import WorkerClient, connector_path
from mirrorline.boot.process import parse_listener, rest_security
from mirrorline.runtime.worker_config import WORKER_CONFIG_DEF
from mirrorline.storage.kafka_configs import KafkaConfigStore, SessionKey
from test_rest_api import FakeHerder  # same folder: on sys.path under pytest

KEY = b"k" * 32


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture
def credentials_file(tmp_path):
    path = tmp_path / "credentials.properties"
    path.write_text("# Connect's PropertyFileLoginModule format\nadmin: s3cret\nviewer=look\\:only\n\n! comment\n")
    return path


def worker_config(**settings: str):
    return WORKER_CONFIG_DEF.parse({k.replace("_", "."): v for k, v in settings.items()})


async def client_for(auth: RestAuth, herder=None) -> TestClient:
    client = TestClient(TestServer(create_app(herder or FakeHerder(), auth=auth)))
    await client.start_server()
    return client


# -- credentials and JAAS files ----------------------------------------------------------------

def test_credentials_file_format_is_java_properties(credentials_file):
    users = parse_credentials(credentials_file.read_text())
    assert users == {"admin": "s3cret", "viewer": "look:only"}


def test_credentials_check_uses_constant_time_compare(monkeypatch):
    calls = []
    real = auth_module.hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth_module.hmac, "compare_digest", spy)
    credentials = Credentials({"admin": "s3cret"})
    assert credentials.check("admin", "s3cret")
    assert not credentials.check("admin", "wrong")
    assert not credentials.check("nobody", "s3cret")  # unknown users are compared too (same timing)
    assert len(calls) == 3


def test_empty_credentials_file_is_refused(tmp_path):
    path = tmp_path / "empty.properties"
    path.write_text("# nobody\n")
    config = worker_config(rest_extension_classes=BASIC_AUTH_EXTENSION, rest_basic_auth_credentials_file=str(path))
    with pytest.raises(ConfigError, match="lists no user"):
        credentials_from_config(config, environ={})


JAAS = f"""
/* Connect's JAAS file */
KafkaServer {{
  org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";
}};
KafkaConnect {{
  // the one that matters
  {PROPERTY_FILE_LOGIN_MODULE} required
  file="{{path}}";
}};
"""


def test_jaas_file_parsing():
    sections = parse_jaas(JAAS.replace("{path}", "/etc/connect/credentials.properties"))
    assert set(sections) == {"KafkaServer", "KafkaConnect"}
    (entry,) = sections["KafkaConnect"]
    assert entry.module == PROPERTY_FILE_LOGIN_MODULE and entry.flag == "required"
    assert entry.options == {"file": "/etc/connect/credentials.properties"}
    assert sections["KafkaServer"][0].options == {"username": "a", "password": "b"}


@pytest.mark.parametrize("text, message", [
    ("KafkaConnect { x required file=\"f\" }", "expected an option name, found '}'"),
    ("KafkaConnect { x required file=\"f\"; }", "expected ';', found 'end of file'"),
    ("KafkaConnect { x required file }; ", "expected '='"),
])
def test_jaas_syntax_errors_are_config_errors(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_jaas(text)


def test_jaas_without_connect_section_or_module(tmp_path):
    path = tmp_path / "jaas.conf"
    path.write_text("Other { a required; };")
    with pytest.raises(ConfigError, match="no KafkaConnect section"):
        credentials_file_from_jaas(path)
    path.write_text("KafkaConnect { com.example.Ldap required url=\"x\"; };")
    with pytest.raises(ConfigError, match="other login modules are not supported"):
        credentials_file_from_jaas(path)


def test_java_options_name_the_jaas_file():
    opts = "-Xmx1g -Djava.security.auth.login.config=/opt/jaas.conf -Dfoo=bar"
    assert jaas_path_from_java_options(opts) == "/opt/jaas.conf"
    assert jaas_path_from_java_options("-Djava.security.auth.login.config='/a b/jaas.conf'") == "/a b/jaas.conf"
    assert jaas_path_from_java_options("-Xmx1g") is None


def test_credentials_found_through_kafka_opts_jaas(tmp_path, credentials_file):
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS.replace("{path}", str(credentials_file)))
    config = worker_config(rest_extension_classes=BASIC_AUTH_EXTENSION)
    credentials = credentials_from_config(config, environ={"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})
    assert credentials.users == ["admin", "viewer"]


def test_basic_auth_settings_errors(credentials_file):
    with pytest.raises(ConfigError, match="^rest.extension.classes: unknown REST extension com.example.X;") as exc:
        credentials_from_config(worker_config(rest_extension_classes="com.example.X"), environ={})
    assert "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match="needs credentials"):
        credentials_from_config(worker_config(rest_extension_classes=BASIC_AUTH_EXTENSION), environ={})
    with pytest.raises(ConfigError, match="Basic authentication is off"):
        credentials_from_config(worker_config(rest_basic_auth_credentials_file=str(credentials_file)), environ={})
    assert credentials_from_config(worker_config(), environ={}) is None


# -- the middleware ------------------------------------------------------------------------------

@pytest.fixture
async def secured(credentials_file):
    config = worker_config(rest_extension_classes=BASIC_AUTH_EXTENSION,
                           rest_basic_auth_credentials_file=str(credentials_file))
    client = await client_for(rest_auth_from_config(config, session_keys=lambda: [KEY], environ={}))
    yield client
    await client.close()


async def test_missing_credentials_get_401_with_connect_body(secured):
    response = await secured.get("/connectors")
    assert response.status == 401
    assert response.headers["WWW-Authenticate"].startswith('Basic realm="KafkaConnect"')
    body = await response.json()
    assert body["error_code"] == 401 and "Authentication required" in body["message"]


async def test_wrong_and_right_credentials(secured):
    wrong = await secured.get("/connectors", headers=basic("admin", "nope"))
    assert wrong.status == 401 and (await wrong.json())["error_code"] == 401
    unknown = await secured.get("/connectors", headers=basic("mallory", "s3cret"))
    assert unknown.status == 401
    right = await secured.get("/connectors", headers=basic("admin", "s3cret"))
    assert right.status == 200 and await right.json() == []
    created = await secured.post("/connectors", headers=basic("viewer", "look:only"),
                                 json={"name": "c1", "config": {"connector.class": "X"}})
    assert created.status == 201


@pytest.mark.parametrize("header", [
    "Basic", "Basic !!!notbase64", "Bearer abc", "Basic " + base64.b64encode(b"no-colon").decode(),
    "Basic " + base64.b64encode(b"\xff\xfe:x").decode(), "basic",
])
async def test_malformed_authorization_headers_are_401(secured, header):
    response = await secured.get("/connectors", headers={"Authorization": header})
    assert response.status == 401
    assert "WWW-Authenticate" in response.headers
    assert (await response.json())["error_code"] == 401


def test_basic_credentials_parser():
    assert basic_credentials(basic("a", "b:c")["Authorization"]) == ("a", "b:c")
    assert basic_credentials("BASIC " + base64.b64encode(b"a:").decode()) == ("a", "")
    assert basic_credentials(None) is None


async def test_status_page_and_metrics_need_auth_by_default(secured):
    for path in ("/ui", "/metrics", "/", "/openapi.json"):
        assert (await secured.get(path)).status == 401, path
    assert (await secured.get("/metrics", headers=basic("admin", "s3cret"))).status == 200


async def test_health_stays_open_for_probes(secured):
    """Kubernetes probes call /health without credentials; it tells only healthy or starting."""
    assert (await secured.get("/health")).status != 401
    assert (await secured.post("/health")).status in (401, 405)


async def test_metrics_left_open_by_setting(credentials_file):
    config = worker_config(rest_extension_classes=BASIC_AUTH_EXTENSION, rest_metrics_auth_enable="false",
                           rest_basic_auth_credentials_file=str(credentials_file))
    client = await client_for(rest_auth_from_config(config, environ={}))
    try:
        assert (await client.get("/metrics")).status == 200
        assert (await client.get("/ui")).status == 401
        assert (await client.get("/connectors")).status == 401
    finally:
        await client.close()


async def test_no_auth_configured_lets_everything_in():
    client = await client_for(rest_auth_from_config(worker_config(), environ={}))
    try:
        assert (await client.get("/connectors")).status == 200
    finally:
        await client.close()


# -- signed forwarded requests ---------------------------------------------------------------------

def test_signature_round_trip_and_tampering():
    headers = sign_request(KEY, "POST", "/connectors?forward=false", b'{"a":1}')
    assert verify_signature([KEY], "POST", "/connectors?forward=false", b'{"a":1}', headers) is None
    assert verify_signature([b"other" * 8, KEY], "POST", "/connectors?forward=false", b'{"a":1}', headers) is None
    assert "does not match" in verify_signature([KEY], "POST", "/connectors?forward=false", b'{"a":2}', headers)
    assert "does not match" in verify_signature([KEY], "PUT", "/connectors?forward=false", b'{"a":1}', headers)
    assert "does not match" in verify_signature([b"x" * 32], "POST", "/connectors?forward=false", b'{"a":1}', headers)
    assert "does not match" in verify_signature([], "POST", "/connectors?forward=false", b'{"a":1}', headers)
    old = sign_request(KEY, "GET", "/", b"", now_ms=int(time.time() * 1000) - 3_600_000)
    assert "expired" in verify_signature([KEY], "GET", "/", b"", old)
    assert "base64" in verify_signature([KEY], "GET", "/", b"", {**old, SIGNATURE_HEADER: "***",
                                                                TIMESTAMP_HEADER: str(int(time.time() * 1000))})


async def test_forwarded_request_signed_by_worker_client_is_accepted(credentials_file):
    config = worker_config(rest_extension_classes=BASIC_AUTH_EXTENSION,
                           rest_basic_auth_credentials_file=str(credentials_file))
    herder = FakeHerder()
    client = await client_for(rest_auth_from_config(config, session_keys=lambda: [KEY], environ={}), herder)
    base = str(client.make_url("")).rstrip("/")
    signed = WorkerClient(signing_key=lambda: KEY)
    unsigned = WorkerClient()
    wrong_key = WorkerClient(signing_key=lambda: b"w" * 32)
    try:
        status, body = await signed.request("POST", base, "/connectors",
                                            {"name": "a/b c", "config": {"connector.class": "X"}})
        assert status == 201 and body["name"] == "a/b c"
        status, _ = await signed.request("PUT", base, connector_path("a/b c", "config"), {"connector.class": "Y"})
        assert status == 200
        for bad in (unsigned, wrong_key):
            with pytest.raises(Exception) as exc:
                await bad.request("DELETE", base, connector_path("a/b c"))
            assert getattr(exc.value, "http_status", None) == 401
        assert "a/b c" in herder.connectors_
    finally:
        for c in (signed, unsigned, wrong_key):
            await c.close()
        await client.close()


async def test_forged_forward_without_signature_is_refused(secured):
    response = await secured.post("/connectors?forward=false", json={"name": "x", "config": {"connector.class": "X"}})
    assert response.status == 401
    # a signature that does not verify is refused even next to valid user credentials
    headers = {**basic("admin", "s3cret"), **sign_request(b"z" * 32, "DELETE", "/connectors/x?forward=false", b"")}
    assert (await secured.delete("/connectors/x?forward=false", headers=headers)).status == 401
    # valid user credentials alone are enough (Connect forwards the user's Authorization header)
    ok = await secured.post("/connectors?forward=false", headers=basic("admin", "s3cret"),
                            json={"name": "x", "config": {"connector.class": "X"}})
    assert ok.status == 201


def test_session_key_records_in_config_topic():
    store = KafkaConfigStore("configs", {"bootstrap.servers": "localhost:1"})
    first, second = SessionKey.generate(), SessionKey.generate()

    def record(offset, value):
        return SimpleNamespace(topic="configs", offset=offset, key=b"session-key",
                               value=json.dumps(value).encode())

    store._on_record(record(0, first.record_value()))
    assert store.session_key.key == first.key and store.session_key.algorithm == "HmacSHA256"
    store._on_record(record(1, second.record_value()))
    assert store.session_keys() == [second.key, first.key]
    store._on_record(record(2, {"key": "***"}))  # unreadable: skipped
    assert store.session_key.key == second.key
    assert "key=" not in repr(second)  # the secret never prints


# -- warnings and TLS --------------------------------------------------------------------------------

def test_warns_when_listening_beyond_loopback_without_auth(caplog, credentials_file):
    with caplog.at_level(logging.WARNING, logger="mirrorline.rest.auth"):
        assert warn_if_open("0.0.0.0", RestAuth(), False)
        assert warn_if_open("", RestAuth(), False)
        assert not warn_if_open("127.0.0.1", RestAuth(), False)
        assert not warn_if_open("localhost", RestAuth(), False)
        assert not warn_if_open("0.0.0.0", RestAuth(credentials=Credentials({"a": "b"})), False)
        assert not warn_if_open("0.0.0.0", RestAuth(), True)
    assert sum("without authentication" in r.message for r in caplog.records) == 2


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    tls = pytest.importorskip("mirrorline.localkafka.tls")
    return tls.write_tls_material(tmp_path_factory.mktemp("tls"), "changeit", client_name="client")


@pytest.mark.parametrize("kind", ["p12", "jks", "pem"])
def test_server_context_from_each_keystore_type(tls_files, kind):
    location = {"p12": tls_files.server_keystore_p12, "jks": tls_files.server_keystore_jks,
                "pem": tls_files.server_keystore_pem}[kind]
    settings = RestSslSettings(keystore_location=str(location), keystore_password="changeit",
                               key_password="changeit", keystore_type={"p12": "PKCS12", "jks": "JKS",
                                                                       "pem": "PEM"}[kind],
                               truststore_location=str(tls_files.truststore_p12), truststore_password="changeit",
                               truststore_type="PKCS12", client_auth="required")
    context = server_ssl_context(settings)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert client_ssl_context(settings).verify_mode == ssl.CERT_REQUIRED


def test_truststores_of_every_type_hold_the_ca(tls_files):
    pems = [trusted_certificates_pem(RestSslSettings(truststore_location=str(path), truststore_password="changeit",
                                                     truststore_type=kind))
            for path, kind in ((tls_files.truststore_p12, "PKCS12"), (tls_files.truststore_jks, "JKS"),
                               (tls_files.ca_pem, "PEM"))]
    assert all("BEGIN CERTIFICATE" in p for p in pems)


def test_jks_without_pyjks_is_a_clear_config_error(tls_files, monkeypatch):
    monkeypatch.setitem(sys.modules, "jks", None)
    settings = RestSslSettings(keystore_location=str(tls_files.server_keystore_jks), keystore_password="changeit")
    with pytest.raises(ConfigError, match="needs the pyjks package"):
        server_ssl_context(settings)


def test_wrong_keystore_password_and_missing_keystore(tls_files):
    with pytest.raises(ConfigError, match="wrong password"):
        server_ssl_context(RestSslSettings(keystore_location=str(tls_files.server_keystore_p12),
                                           keystore_password="nope", keystore_type="PKCS12"))
    with pytest.raises(ConfigError, match="needs a key store: set listeners.https.ssl.keystore.location"):
        server_ssl_context(RestSslSettings(source="listeners.https.ssl."))


def test_listener_prefix_is_all_or_nothing():
    both = worker_config(ssl_keystore_location="/worker.p12", ssl_client_auth="required",
                         listeners_https_ssl_keystore_location="/rest.p12")
    settings = RestSslSettings.from_config(both)
    assert settings.keystore_location == "/rest.p12" and settings.client_auth == "none"  # no fallback per key
    worker_only = RestSslSettings.from_config(worker_config(ssl_keystore_location="/worker.p12",
                                                            ssl_keystore_password="pw"))
    assert worker_only.keystore_location == "/worker.p12" and worker_only.keystore_password == "pw"


def test_https_listener_parsed_and_secured(tls_files, credentials_file, caplog):
    listener = parse_listener(["https://0.0.0.0:8443"])
    assert (listener.scheme, listener.port) == ("https", 8443)
    config = worker_config(listeners="https://0.0.0.0:8443",
                           listeners_https_ssl_keystore_location=str(tls_files.server_keystore_p12),
                           listeners_https_ssl_keystore_password="changeit",
                           listeners_https_ssl_keystore_type="PKCS12")
    with caplog.at_level(logging.WARNING):
        auth, context = rest_security(config, listener, environ={})
    assert isinstance(context, ssl.SSLContext) and not auth.enabled
    assert any("without authentication" in r.message for r in caplog.records)
    with pytest.raises(ConfigError, match="not of the form"):
        parse_listener(["ftp://x:1"])
