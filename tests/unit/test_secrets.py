"""Secrets stay secret: the redaction rule, config error messages, and the REST boundary of a
real (distributed, in-memory) herder: responses, statuses and logs never show a planted secret,
and a config read and written back keeps the stored secret."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mirrorline.api import ConfigDef, ConfigKey, RegexList, SourceConnector, SourceTask, Type
from mirrorline.api.config import Password
from mirrorline.api.secrets import HIDDEN, is_secret, redact, restore_hidden, scrub, secret_values
from mirrorline.plugins import full_name
from mirrorline.rest import create_app
from support.herder_fakes import eventually, patch_record_producer, registry_of, start_distributed_herder

SECRET = "pl4nted-S3cret-7f3a"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
        f'password="{SECRET}";')


# -- the rule ------------------------------------------------------------------------------------

@pytest.mark.parametrize("key, secret", [
    ("password", True),
    ("ssl.keystore.password", True),
    ("ssl.key.password", True),
    ("A.ssl.keystore.password", True),
    ("source.cluster.ssl.truststore.password", True),
    ("sasl.jaas.config", True),
    ("source.cluster.sasl.jaas.config", True),
    ("target.admin.sasl.jaas.config", True),
    ("SASL.JAAS.CONFIG", True),
    ("secret", True),
    ("sasl.oauthbearer.client.secret", True),
    ("ssl.keystore.key", True),
    ("A.ssl.keystore.key", True),
    ("ssl.keystore.location", False),
    ("ssl.keystore.type", False),
    ("sasl.mechanism", False),
    ("sasl.jaas.config.file", False),
    ("password.policy.url", False),
    ("passwords", False),
    ("secretive", False),
    ("my_password", False),
    ("topics", False),
    ("name", False),
])
def test_is_secret_by_name(key, secret):
    assert is_secret(key) is secret


def test_declared_password_keys_are_secret_whatever_their_name():
    config_def = ConfigDef([ConfigKey("db.token", Type.PASSWORD, default=None),
                            ConfigKey("db.user", Type.STRING, default=None)])
    assert is_secret("db.token", config_def)
    assert not is_secret("db.token")
    assert not is_secret("db.user", config_def)


def test_redact_hides_secret_values_and_keeps_the_rest():
    config = {"name": "c", "source.cluster.sasl.jaas.config": JAAS, "ssl.key.password": None,
              "db.token": SECRET, "topics": ".*"}
    config_def = ConfigDef([ConfigKey("db.token", Type.PASSWORD, default=None)])
    assert redact(config, config_def) == {"name": "c", "source.cluster.sasl.jaas.config": HIDDEN,
                                          "ssl.key.password": None, "db.token": HIDDEN, "topics": ".*"}
    assert config["db.token"] == SECRET  # a copy: the original is untouched


def test_scrub_replaces_whole_values_and_credentials_inside_a_jaas_config():
    config = {"sasl.jaas.config": JAAS, "x.password": Password("pw-in-a-Password")}
    assert SECRET in secret_values(config)
    text = f"login failed for {JAAS} / option password={SECRET} / pw-in-a-Password"
    scrubbed = scrub(text, config)
    assert SECRET not in scrubbed and "pw-in-a-Password" not in scrubbed
    assert scrubbed.count(HIDDEN) == 3
    assert scrub("nothing here", config) == "nothing here"


def test_restore_hidden_keeps_stored_secrets_and_names_missing_ones():
    stored = {"a.password": "real", "topics": "x"}
    incoming = {"a.password": HIDDEN, "b.password": HIDDEN, "topics": HIDDEN}
    restored, missing = restore_hidden(incoming, stored)
    assert restored == {"a.password": "real", "b.password": HIDDEN, "topics": HIDDEN}
    assert missing == ["b.password"]


# -- config error messages -------------------------------------------------------------------------

def test_config_errors_never_echo_a_secret_value():
    config_def = ConfigDef([
        ConfigKey("db.password", Type.PASSWORD, validator=RegexList()),  # a validator quoting its input
        ConfigKey("x.sasl.jaas.config", Type.LIST, validator=RegexList()),  # secret by name only
        ConfigKey("count", Type.INT),
    ])
    bad = f"({SECRET}"  # not a valid regular expression
    values = config_def.validate({"db.password": bad, "x.sasl.jaas.config": bad, "count": "x"})
    errors = [e for v in values for e in v.errors]
    assert len(errors) == 3
    assert all(SECRET not in e for e in errors), errors
    assert "Invalid value [hidden] for configuration x.sasl.jaas.config" in errors[1]
    with pytest.raises(Exception) as raised:
        config_def.parse({"db.password": bad, "x.sasl.jaas.config": bad, "count": "1"})
    assert SECRET not in str(raised.value)


def test_config_repr_hides_secrets():
    config = ConfigDef([ConfigKey("x.password", Type.STRING), ConfigKey("p", Type.PASSWORD)]).parse(
        {"x.password": SECRET, "p": SECRET})
    assert SECRET not in repr(config)


# -- the REST boundary of a real herder --------------------------------------------------------------

class VaultSourceConnector(SourceConnector):
    """Declares a PASSWORD setting; hands its whole config to its task; fails on request, quoting its secrets."""

    config_def = ConfigDef([ConfigKey("vault.token", Type.PASSWORD, doc="Token."),
                            ConfigKey("vault.url", Type.STRING, default="http://vault", doc="URL."),
                            ConfigKey("fail", Type.BOOLEAN, default="false", doc="Fail in start().")])

    async def start(self, config) -> None:
        self.config = dict(config.originals)
        if config["fail"]:
            raise RuntimeError(f"cannot log in with token {config['vault.token'].value} "
                               f"and {self.config.get('source.cluster.sasl.jaas.config')}")

    def task_class(self):
        return VaultSourceTask

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.config)]

    async def stop(self) -> None:
        pass


class VaultSourceTask(SourceTask):
    """Produces nothing."""

    async def start(self, config) -> None:
        pass

    async def poll(self):
        await asyncio.sleep(0.05)
        return []

    async def stop(self) -> None:
        pass


CLASS = full_name(VaultSourceConnector)


def vault_config(**extra: str) -> dict[str, str]:
    return {"connector.class": CLASS, "tasks.max": "1", "vault.token": SECRET,
            "source.cluster.sasl.jaas.config": JAAS, "A.ssl.keystore.password": SECRET + "-ks", **extra}


@pytest.fixture
async def rest(monkeypatch):
    """A REST client over a real DistributedHerder (in-memory stores, leader) knowing VaultSourceConnector."""
    patch_record_producer(monkeypatch)
    rig = await start_distributed_herder(registry_of(VaultSourceConnector))
    await rig.rebalance()
    async with TestClient(TestServer(create_app(rig.herder))) as client:
        client.rig = rig
        yield client
    await rig.stop()


async def _json(resp, status: int = 200):
    body = await resp.json()
    assert resp.status == status, body
    return body


async def _running(client, name: str) -> dict:
    async def check():
        await client.rig.rebalance_until_stable()
        body = await (await client.get(f"/connectors/{name}/status")).json()
        return body if body.get("tasks") and body["tasks"][0]["state"] == "RUNNING" else None
    return await eventually(check, timeout=5)


async def test_secrets_never_leave_through_rest_or_logs(rest, caplog):
    caplog.set_level(logging.DEBUG)
    created = await _json(await rest.post("/connectors", json={"name": "v", "config": vault_config()}), 201)
    seen = [created]
    await _running(rest, "v")
    for path in ("/connectors/v", "/connectors/v/config", "/connectors/v/tasks", "/connectors/v/status",
                 "/connectors/v/tasks/0/status", "/connectors?expand=info&expand=status"):
        seen.append(await _json(await rest.get(path)))
    assert seen[2]["vault.token"] == HIDDEN
    assert seen[2]["source.cluster.sasl.jaas.config"] == HIDDEN
    assert seen[2]["A.ssl.keystore.password"] == HIDDEN
    assert seen[3][0]["config"]["vault.token"] == HIDDEN  # the task config too
    validated = await _json(await rest.put(f"/connector-plugins/{CLASS}/config/validate",
                                           json=vault_config(fail="maybe", name="v")))
    assert validated["error_count"] == 1, [c["value"] for c in validated["configs"] if c["value"]["errors"]]
    token = next(c["value"] for c in validated["configs"] if c["value"]["name"] == "vault.token")
    assert token["value"] == HIDDEN
    seen.append(validated)
    refused = await rest.put("/connectors/bad/config", json=vault_config(**{"tasks.max": "many"}))
    seen.append(await _json(refused, 400))
    assert SECRET not in repr(seen)
    # the stores keep the real value, and so does the running connector
    assert client_config(rest)["vault.token"] == SECRET
    assert SECRET not in caplog.text


def client_config(client) -> dict[str, str]:
    return client.rig.config_store.connectors()["v"]


async def _failed(client, name: str) -> dict:
    async def check():
        body = await (await client.get(f"/connectors/{name}/status")).json()
        return body if body["connector"]["state"] == "FAILED" else None
    await client.rig.rebalance_until_stable()
    return await eventually(check, timeout=5)


async def test_failed_connector_trace_is_scrubbed(rest):
    await _json(await rest.post("/connectors", json={"name": "f", "config": vault_config(fail="true")}), 201)
    status = await _failed(rest, "f")
    assert "cannot log in with token" in status["connector"]["trace"]
    assert SECRET not in repr(status)
    assert HIDDEN in status["connector"]["trace"]


async def test_failed_connector_log_is_scrubbed(rest, caplog):
    caplog.set_level(logging.DEBUG)
    await _json(await rest.post("/connectors", json={"name": "f", "config": vault_config(fail="true")}), 201)
    await _failed(rest, "f")
    assert SECRET not in caplog.text


async def test_put_back_what_get_returned_keeps_the_secrets(rest):
    await _json(await rest.post("/connectors", json={"name": "v", "config": vault_config()}), 201)
    config = await _json(await rest.get("/connectors/v/config"))
    assert config["vault.token"] == HIDDEN
    config["vault.url"] = "http://vault-2"
    info = await _json(await rest.put("/connectors/v/config", json=config))
    assert info["config"]["vault.token"] == HIDDEN
    stored = client_config(rest)
    assert stored["vault.token"] == SECRET
    assert stored["source.cluster.sasl.jaas.config"] == JAAS
    assert stored["A.ssl.keystore.password"] == SECRET + "-ks"
    assert stored["vault.url"] == "http://vault-2"


async def test_patch_with_hidden_keeps_and_a_new_value_replaces(rest):
    await _json(await rest.post("/connectors", json={"name": "v", "config": vault_config()}), 201)
    await _json(await rest.patch("/connectors/v/config", json={"vault.token": HIDDEN, "vault.url": "http://x"}))
    assert client_config(rest)["vault.token"] == SECRET
    await _json(await rest.patch("/connectors/v/config", json={"vault.token": "rotated"}))
    assert client_config(rest)["vault.token"] == "rotated"
    await _json(await rest.patch("/connectors/v/config", json={"A.ssl.keystore.password": None}))
    assert "A.ssl.keystore.password" not in client_config(rest)


async def test_hidden_without_a_stored_secret_is_400(rest):
    body = await _json(await rest.post("/connectors", json={"name": "n", "config": vault_config(
        **{"vault.token": HIDDEN})}), 400)
    assert "vault.token" in body["message"] and "no stored value" in body["message"]
    await _json(await rest.post("/connectors", json={"name": "v", "config": vault_config()}), 201)
    body = await _json(await rest.patch("/connectors/v/config", json={"new.password": HIDDEN}), 400)
    assert "new.password" in body["message"]
    assert "n" not in await _json(await rest.get("/connectors"))
