"""Bad REST input is a 4xx and the worker keeps serving: deep JSON, large bodies, connector names;
and /openapi.json states the constraints the server enforces."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mirrorline.rest import create_app
from mirrorline.rest.common import DEFAULT_MAX_BODY, MAX_JSON_DEPTH
from mirrorline.rest.routes_connectors import MAX_NAME_LENGTH, NAME_PATTERN, check_new_name
from test_rest_api import FakeHerder

CONFIG = {"connector.class": "Sequence", "tasks.max": "1"}


@pytest.fixture
def herder() -> FakeHerder:
    return FakeHerder()


@pytest.fixture
async def client(herder):
    async with TestClient(TestServer(create_app(herder))) as test_client:
        yield test_client


async def error(resp, status: int) -> str:
    body = await resp.json()
    assert resp.status == status, body
    assert body["error_code"] == status
    return body["message"]


async def still_serving(client) -> None:
    resp = await client.get("/connectors")
    assert resp.status == 200


# -- nesting ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 2_000, 100_000])
@pytest.mark.parametrize("path, method", [("/connectors", "post"), ("/connectors/c/config", "put"),
                                          ("/connectors/c/offsets", "patch"),
                                          ("/connector-plugins/Sequence/config/validate", "put")])
async def test_deeply_nested_json_is_400(client, herder, depth, path, method):
    body = "[" * depth + "]" * depth
    message = await error(await getattr(client, method)(path, data=body), 400)
    assert f"more than {MAX_JSON_DEPTH} levels" in message
    assert not [c for c in herder.calls if c[0] != "connectors"]
    await still_serving(client)


async def test_nesting_up_to_the_limit_is_parsed(client):
    body = '{"offsets":' + "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1) + "}"
    message = await error(await client.patch("/connectors/c/offsets", data=body), 400)
    assert "levels" not in message  # parsed, then refused for its shape


# -- size ------------------------------------------------------------------------------------------

async def test_body_over_the_limit_is_413_and_nothing_is_written(client, herder):
    config = {**CONFIG, "big": "x" * (2 * 1024 * 1024)}
    message = await error(await client.post("/connectors", json={"name": "big", "config": config}), 413)
    assert "rest.request.max.bytes" in message and str(DEFAULT_MAX_BODY) in message
    assert herder.calls == [] and herder.connectors_ == {}
    await still_serving(client)


async def test_chunked_body_over_the_limit_is_413(client, herder):
    async def chunks():
        for _ in range(40):
            yield b" " * 64 * 1024

    await error(await client.put("/connectors/big/config", data=chunks()), 413)
    assert herder.calls == []
    await still_serving(client)


async def test_limit_comes_from_the_worker_config(herder):
    herder.worker_config = {"rest.request.max.bytes": 2048}
    async with TestClient(TestServer(create_app(herder))) as client:
        await error(await client.put("/connectors/c/config", json={**CONFIG, "x": "y" * 3000}), 413)
        resp = await client.put("/connectors/c/config", json={**CONFIG, "x": "y" * 1000})
        assert resp.status == 201


async def test_body_just_under_the_limit_is_read(client):
    config = {**CONFIG, "big": "x" * (DEFAULT_MAX_BODY - 200)}
    resp = await client.put("/connectors/c/config", json=config)
    assert resp.status == 201


# -- connector names -------------------------------------------------------------------------------

@pytest.mark.parametrize("name, why", [
    ("x" * (MAX_NAME_LENGTH + 1), f"{MAX_NAME_LENGTH + 1} characters long"),
    ("x" * 100_000, "100000 characters long"),
    ("a\nb", "U+000A"),
    ("evil\r\n2026-01-01 INFO forged line", "U+000D"),
    ("a\x00b", "U+0000"),
    ("a\x1bb", "U+001B"),
    ("a\x85b", "U+0085"),
    ("a\u2028b", "U+2028"),
    ("abc\u202edcba", "U+202E"),
    ("\ufeffbom", "U+FEFF"),
])
async def test_bad_names_are_400_with_the_rule(client, herder, name, why):
    for config in (CONFIG, {**CONFIG, "name": name}):
        message = await error(await client.post("/connectors", json={"name": name, "config": config}), 400)
        assert why in message and f"1 to {MAX_NAME_LENGTH} characters" in message
    assert herder.connectors_ == {}
    await still_serving(client)


async def test_bad_name_in_put_url_is_400_when_it_would_create(client, herder):
    message = await error(await client.put("/connectors/" + quote("a\nb", safe="") + "/config", json=CONFIG), 400)
    assert "U+000A" in message
    assert herder.connectors_ == {}


async def test_existing_connector_with_an_old_style_name_can_still_be_replaced(client, herder):
    legacy = "x" * 300
    herder.connectors_[legacy] = {"config": {**CONFIG, "name": legacy}, "tasks": 1, "state": "RUNNING"}
    resp = await client.put("/connectors/" + quote(legacy) + "/config", json=CONFIG)
    assert resp.status == 200
    assert (await client.delete("/connectors/" + quote(legacy))).status == 204


@pytest.mark.parametrize("name", ["a", "x" * MAX_NAME_LENGTH, "mirror a->b", "a/b", "é東", "a\u00a0b", " padded "])
async def test_good_names_are_accepted_and_addressable(client, name):
    resp = await client.post("/connectors", json={"name": name, "config": CONFIG})
    assert resp.status == 201, await resp.text()
    stored = name.strip()
    assert (await client.get(resp.headers["Location"])).status == 200
    assert (await client.delete("/connectors/" + quote(stored, safe=""))).status == 204


@pytest.mark.parametrize("name", ["a", "x" * 249, "x" * 250, "a\nb", "  ", "\t", "a\u202eb", "é", "\x7f", "a b",
                                  "\u2066", "\ufeff", "a\u00a0"])
def test_openapi_pattern_agrees_with_the_server(name):
    try:
        check_new_name(name)
        accepted = True
    except Exception:
        accepted = False
    schema_ok = len(name) <= MAX_NAME_LENGTH and len(name) >= 1 and re.search(NAME_PATTERN, name) is not None
    assert accepted == schema_ok


# -- the OpenAPI document --------------------------------------------------------------------------

async def test_openapi_states_the_constraints(client):
    doc = await (await client.get("/openapi.json")).json()
    schemas = doc["components"]["schemas"]
    name = schemas["CreateConnectorRequest"]["properties"]["name"]
    assert name["maxLength"] == MAX_NAME_LENGTH and name["minLength"] == 1 and name["pattern"] == NAME_PATTERN
    assert schemas["CreateConnectorRequest"]["required"] == ["name", "config"]
    assert schemas["ConnectorConfig"]["required"] == ["connector.class"]
    assert schemas["ConnectorOffsets"]["properties"]["offsets"]["minItems"] == 1
    post = doc["paths"]["/connectors"]["post"]
    assert {"400", "413"} <= set(post["responses"])
    params = doc["paths"]["/connectors/{connector}/config"]["put"]["parameters"]
    assert params[0]["schema"]["maxLength"] == MAX_NAME_LENGTH
    task = doc["paths"]["/connectors/{connector}/tasks/{task}/status"]["get"]["parameters"][1]
    assert task["schema"] == {"type": "integer", "minimum": 0}


@pytest.mark.parametrize("value", ["null", "yes", "1", ""])
async def test_boolean_query_flags_other_than_true_or_false_are_400(client, value):
    response = await client.get(f"/connector-plugins?connectorsOnly={value}")
    assert response.status == 400
    assert "connectorsOnly must be true or false" in (await response.json())["message"]
    doc = await (await client.get("/openapi.json")).json()
    assert "400" in doc["paths"]["/connector-plugins"]["get"]["responses"]


@pytest.mark.parametrize("value", ["true", "TRUE", "false"])
async def test_boolean_query_flags_accept_true_and_false(client, value):
    assert (await client.get(f"/connector-plugins?connectorsOnly={value}")).status == 200


async def test_openapi_limits_connector_class_to_installed_plugins():
    from mirrorline.plugins import PluginRegistry

    class PluginHerder(FakeHerder):
        plugins = PluginRegistry.discover()

    async with TestClient(TestServer(create_app(PluginHerder()))) as client:
        doc = await (await client.get("/openapi.json")).json()
    names = doc["components"]["schemas"]["ConnectorConfig"]["properties"]["connector.class"]["enum"]
    assert {"MirrorSource", "MirrorSourceConnector", "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "mirrorline.connectors.source_mirror.connector.MirrorSourceConnector"} <= set(names)
    assert "os.system" not in names
