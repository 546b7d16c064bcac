"""The REST extension contract (mirrorline.api.rest_extension): plugins' routes on the REST API."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from mirrorline.api import (
    BadRequestError,
    ClusterState,
    NotFoundError,
    RestExtension,
    RestExtensionContext,
    RestRequest,
    hookimpl,
)
from mirrorline.plugins import PluginRegistry
from mirrorline.rest import create_app
from mirrorline.rest.auth import Credentials, RestAuth
from mirrorline.rest.extensions import HerderClusterState, installed_extensions
from mirrorline.storage.configs import MemoryConfigStore
from test_api_contract import imported_modules  # same folder: on sys.path under pytest
from test_rest_api import FakeHerder

SECRET_CONFIG = {"connector.class": "MirrorSource", "target.cluster.sasl.jaas.config": "secret-value"}


class Echo(RestExtension):
    """Routes that show what a handler sees, and how errors and odd answers come out."""

    closed = 0

    def register(self, context: RestExtensionContext) -> None:
        self.state = context.cluster_state
        context.add_route("POST", "/ext/echo/{thing}", self.echo, summary="Echo the request")
        context.add_route("GET", "/ext/state/{name}", self.state_of)
        context.add_route("GET", "/ext/missing", self.missing)
        context.add_route("DELETE", "/ext/nothing", self.nothing)
        context.add_route("GET", "/ext/odd", self.odd)
        context.add_route("GET", "/connectors", self.nothing)  # taken by the API: refused

    async def echo(self, request: RestRequest) -> tuple[int, Any]:
        return 201, {"method": request.method, "path": request.path, "params": dict(request.path_params),
                     "query": dict(request.query), "all": {k: list(v) for k, v in request.query_all.items()},
                     "body": request.json()}

    async def state_of(self, request: RestRequest) -> tuple[int, Any]:
        name = request.path_params["name"]
        return 200, {"worker": self.state.worker_id, "connectors": await self.state.connectors(),
                     "config": await self.state.connector_config(name),
                     "tasks": await self.state.task_configs(name),
                     "state": (await self.state.connector_status(name))["connector"]["state"]}

    async def missing(self, request: RestRequest) -> tuple[int, Any]:
        raise NotFoundError("no such thing")

    async def nothing(self, request: RestRequest) -> tuple[int, Any]:
        return 204, None

    async def odd(self, request: RestRequest) -> tuple[int, Any]:
        return "not a tuple"  # type: ignore[return-value]

    async def close(self) -> None:
        type(self).closed += 1


class Broken(RestExtension):
    """Fails in register: left out, the API still served."""

    def register(self, context: RestExtensionContext) -> None:
        raise RuntimeError("broken extension")


class StoreHerder(FakeHerder):
    """A FakeHerder with a config store, as every real herder has."""

    def __init__(self) -> None:
        super().__init__()
        self.config_store = MemoryConfigStore()
        self.worker_id = "w1:8083"


@pytest.fixture
async def client():
    herder = FakeHerder()
    await herder.put_connector_config("c1", dict(SECRET_CONFIG), allow_replace=False)
    Echo.closed = 0
    test_client = TestClient(TestServer(create_app(herder, worker_id="w0:8083", rest_extensions=[Broken, Echo])))
    await test_client.start_server()
    yield test_client
    await test_client.close()


async def test_handler_sees_method_path_parameters_query_and_json_body(client):
    resp = await client.post("/ext/echo/a%20b?x=1&x=2&y=3", json={"k": [1, 2]})
    assert resp.status == 201
    assert await resp.json() == {"method": "POST", "path": "/ext/echo/a b", "params": {"thing": "a b"},
                                 "query": {"x": "1", "y": "3"}, "all": {"x": ["1", "2"], "y": ["3"]},
                                 "body": {"k": [1, 2]}}


@pytest.mark.parametrize("raw, words", [("{not json", "Request body is not valid JSON"),
                                        ("", "Request body is empty")])
async def test_a_body_that_is_not_json_is_a_400_when_the_handler_reads_it(client, raw, words):
    resp = await client.post("/ext/echo/x", data=raw)
    assert resp.status == 400
    body = await resp.json()
    assert body["error_code"] == 400 and words in body["message"]


async def test_errors_and_empty_answers(client):
    resp = await client.get("/ext/missing")
    assert resp.status == 404 and await resp.json() == {"error_code": 404, "message": "no such thing"}
    resp = await client.delete("/ext/nothing")
    assert resp.status == 204 and await resp.read() == b""
    resp = await client.get("/ext/odd")
    assert resp.status == 500 and "not (status, body)" in (await resp.json())["message"]
    resp = await client.post("/ext/missing")  # wrong method: the API's 405
    assert resp.status == 405 and (await resp.json())["error_code"] == 405


async def test_a_taken_route_stays_the_apis_and_a_broken_extension_is_left_out(client):
    resp = await client.get("/connectors")
    assert resp.status == 200 and await resp.json() == ["c1"]


async def test_cluster_state_without_config_store_reads_through_the_herder(client):
    resp = await client.get("/ext/state/c1")
    body = await resp.json()
    assert body["worker"] == "w0:8083" and body["connectors"] == ["c1"] and body["state"] == "RUNNING"
    assert body["tasks"] == [{"task.index": "0"}, {"task.index": "1"}]
    resp = await client.get("/ext/state/nope")
    assert resp.status == 404


async def test_cluster_state_reads_configs_as_stored():
    herder = StoreHerder()
    await herder.config_store.put_connector("c1", SECRET_CONFIG)
    await herder.config_store.put_task_configs("c1", [{"task.assigned.partitions": "t-0"}])
    state: ClusterState = HerderClusterState(herder, None)
    assert state.worker_id == "w1:8083"
    assert await state.connector_config("c1") == SECRET_CONFIG  # secrets not hidden: as stored
    assert await state.task_configs("c1") == [{"task.assigned.partitions": "t-0"}]
    with pytest.raises(NotFoundError):
        await state.connector_config("nope")
    with pytest.raises(NotFoundError):
        await state.task_configs("nope")


async def test_openapi_lists_extension_routes_with_their_summary(client):
    doc = await (await client.get("/openapi.json")).json()
    assert doc["paths"]["/ext/echo/{thing}"]["post"]["summary"] == "Echo the request"
    assert doc["paths"]["/ext/echo/{thing}"]["post"]["parameters"][0]["name"] == "thing"
    assert "/ext/state/{name}" in doc["paths"]


async def test_extensions_are_closed_when_the_app_stops():
    Echo.closed = 0
    test_client = TestClient(TestServer(create_app(FakeHerder(), rest_extensions=[Echo])))
    await test_client.start_server()
    await test_client.close()
    assert Echo.closed == 1


async def test_extension_routes_are_behind_authentication():
    auth = RestAuth(credentials=Credentials({"admin": "pw"}))
    test_client = TestClient(TestServer(create_app(FakeHerder(), auth=auth, rest_extensions=[Echo])))
    await test_client.start_server()
    try:
        resp = await test_client.delete("/ext/nothing")
        assert resp.status == 401
        token = base64.b64encode(b"admin:pw").decode()
        resp = await test_client.delete("/ext/nothing", headers={"Authorization": f"Basic {token}"})
        assert resp.status == 204
    finally:
        await test_client.close()


def test_add_route_checks_method_and_path():
    from aiohttp import web

    from mirrorline.rest.extensions import _Context

    context = _Context(web.Application(), HerderClusterState(FakeHerder(), None), "x")

    async def handler(request):
        return 200, None

    with pytest.raises(ValueError, match="method"):
        context.add_route("TRACE", "/a", handler)
    with pytest.raises(ValueError, match="path"):
        context.add_route("GET", "no-slash", handler)


class Holder:
    """A plugin registering one good extension and one that is not a RestExtension."""

    @staticmethod
    @hookimpl
    def register_rest_extensions():
        return [Echo, dict]


def test_registry_collects_extensions_and_reports_bad_ones(caplog):
    with caplog.at_level(logging.ERROR):
        registry = PluginRegistry.discover(extra_plugins=(Holder,))
    assert Echo in registry.rest_extensions()
    assert dict not in registry.rest_extensions()
    assert any("is not a RestExtension subclass" in f.error for f in registry.failures)

    class WithPlugins:
        plugins = registry

    assert Echo in installed_extensions(WithPlugins())


def test_the_mirroring_extension_is_installed_by_the_source_mirror_plugin():
    from mirrorline.connectors.source_mirror.rest_admin import MirroringRestExtension

    assert MirroringRestExtension in PluginRegistry.discover().rest_extensions()


def test_installed_extensions_never_calls_into_the_herder():
    class NeverStarted:
        def __getattr__(self, name):
            raise AssertionError(f"herder.{name} used")

    assert installed_extensions(NeverStarted()) == []


def test_the_contract_imports_no_web_framework():
    from pathlib import Path

    import mirrorline.api.rest_extension as module

    modules = {name for _, name in imported_modules(Path(module.__file__))}
    assert not any(name.split(".")[0] in ("aiohttp", "framework") and not name.startswith("mirrorline.api")
                   for name in modules), modules


def test_request_json_raises_the_recorded_error():
    error = BadRequestError("Request body is empty; a JSON document is required")
    request = RestRequest("GET", "/x", body_error=error)
    with pytest.raises(BadRequestError, match="empty"):
        request.json()
    assert RestRequest("POST", "/x", body={"a": 1}).json() == {"a": 1}


async def test_resolved_connector_config_uses_the_workers_config_providers(monkeypatch):
    from mirrorline.runtime.config_providers import ConfigResolver

    monkeypatch.setenv("MIRRORLINE_TEST_JAAS", "resolved-secret")
    herder = StoreHerder()
    herder.worker = type("W", (), {})()
    herder.worker.resolver = ConfigResolver.from_worker_config(
        {"config.providers": "env", "config.providers.env.class": "EnvVarConfigProvider"})
    stored = {"connector.class": "MirrorSource", "target.cluster.sasl.jaas.config": "${env:MIRRORLINE_TEST_JAAS}"}
    await herder.config_store.put_connector("c1", stored)
    state = HerderClusterState(herder, None)
    assert await state.connector_config("c1") == stored  # as stored: the reference, not the value
    assert (await state.resolved_connector_config("c1"))["target.cluster.sasl.jaas.config"] == "resolved-secret"
    herder.worker.resolver = ConfigResolver()  # no providers: as stored
    assert await state.resolved_connector_config("c1") == stored
