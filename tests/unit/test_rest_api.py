"""Unit tests of the REST mapping layer (mirrorline.rest) over an in-memory fake Herder.

The fake stands in for the herder only to check how requests become herder calls and how
results and exceptions become Connect's status codes and JSON shapes.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from mirrorline.api.errors import AlreadyExistsError, BadRequestError, NotFoundError, RebalanceInProgressError
from mirrorline.rest import RestServer, create_app
from mirrorline.rest.common import LOGGERS
from mirrorline.rest.loggers import Loggers
from mirrorline.rest.openapi import OPERATIONS, registered_operations
from mirrorline.runtime.herder import Herder

WORKER = "127.0.0.1:8083"


class FakeHerder(Herder):
    """A dict of connectors behind the Herder interface; records the calls it gets."""

    def __init__(self) -> None:
        self.connectors_: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.health_state = ("healthy", "Worker has completed startup and is ready to handle requests.")
        self.offsets: dict[str, list[dict[str, Any]]] = {}
        self.fail_with: Exception | None = None
        self.vanish_on_status: str | None = None

    def _record(self, method: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append((method, args, kwargs))
        if self.fail_with is not None:
            raise self.fail_with

    def _get(self, name: str) -> dict[str, Any]:
        if name not in self.connectors_:
            raise NotFoundError(f"Connector {name} not found")
        return self.connectors_[name]

    def _info(self, name: str) -> dict[str, Any]:
        c = self._get(name)
        return {"name": name, "config": dict(c["config"]),
                "tasks": [{"connector": name, "task": i} for i in range(c["tasks"])], "type": "source"}

    def _status(self, name: str) -> dict[str, Any]:
        c = self._get(name)
        return {"name": name, "connector": {"state": c["state"], "worker_id": WORKER},
                "tasks": [{"id": i, "state": c["state"], "worker_id": WORKER} for i in range(c["tasks"])],
                "type": "source"}

    async def server_info(self) -> dict[str, Any]:
        self._record("server_info")
        return {"version": "0.1.0", "commit": "abc123", "kafka_cluster_id": "cluster-1"}

    async def health(self) -> tuple[str, str]:
        self._record("health")
        return self.health_state

    async def connectors(self) -> list[str]:
        self._record("connectors")
        return sorted(self.connectors_)

    async def connector_info(self, name: str) -> dict[str, Any]:
        self._record("connector_info", name)
        return self._info(name)

    async def connector_config(self, name: str) -> dict[str, str]:
        self._record("connector_config", name)
        return dict(self._get(name)["config"])

    async def put_connector_config(self, name: str, config: dict[str, Any], *, allow_replace: bool,
                                   initial_state: str | None = None) -> tuple[bool, dict[str, Any]]:
        self._record("put_connector_config", name, config, allow_replace=allow_replace, initial_state=initial_state)
        if "connector.class" not in config:
            raise BadRequestError("Connector configuration is invalid and contains the following 1 error(s):\n"
                                  "Missing required configuration \"connector.class\" which has no default value.")
        exists = name in self.connectors_
        if exists and not allow_replace:
            raise AlreadyExistsError(f"Connector {name} already exists")
        tasks = self.connectors_[name]["tasks"] if exists else 2
        state = self.connectors_[name]["state"] if exists else (initial_state or "RUNNING")
        self.connectors_[name] = {"config": dict(config), "tasks": tasks, "state": state}
        return not exists, self._info(name)

    async def patch_connector_config(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self._record("patch_connector_config", name, patch)
        config = self._get(name)["config"]
        for key, value in patch.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        return self._info(name)

    async def delete_connector(self, name: str) -> None:
        self._record("delete_connector", name)
        self._get(name)
        del self.connectors_[name]

    async def connector_status(self, name: str) -> dict[str, Any]:
        self._record("connector_status", name)
        if name == self.vanish_on_status:
            raise NotFoundError(f"Connector {name} not found")
        return self._status(name)

    async def task_status(self, name: str, task: int) -> dict[str, Any]:
        self._record("task_status", name, task)
        tasks = self._status(name)["tasks"]
        if task >= len(tasks):
            raise NotFoundError(f"Task {name}-{task} not found")
        return tasks[task]

    async def task_configs(self, name: str) -> list[dict[str, Any]]:
        self._record("task_configs", name)
        return [{"id": {"connector": name, "task": i}, "config": {"task.index": str(i)}}
                for i in range(self._get(name)["tasks"])]

    async def restart_connector(self, name: str, *, include_tasks: bool = False,
                                only_failed: bool = False) -> dict[str, Any] | None:
        self._record("restart_connector", name, include_tasks=include_tasks, only_failed=only_failed)
        status = self._status(name)
        if not include_tasks and not only_failed:
            return None
        status["connector"]["state"] = "RESTARTING"
        if include_tasks:
            for task in status["tasks"]:
                task["state"] = "RESTARTING"
        return status

    async def restart_task(self, name: str, task: int) -> None:
        self._record("restart_task", name, task)
        if task >= self._get(name)["tasks"]:
            raise NotFoundError(f"Task {name}-{task} not found")

    async def pause_connector(self, name: str) -> None:
        self._record("pause_connector", name)
        self._get(name)["state"] = "PAUSED"

    async def resume_connector(self, name: str) -> None:
        self._record("resume_connector", name)
        self._get(name)["state"] = "RUNNING"

    async def stop_connector(self, name: str) -> None:
        self._record("stop_connector", name)
        c = self._get(name)
        c["state"], c["tasks"] = "STOPPED", 0

    async def connector_offsets(self, name: str) -> dict[str, Any]:
        self._record("connector_offsets", name)
        self._get(name)
        return {"offsets": list(self.offsets.get(name, []))}

    async def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        self._record("alter_connector_offsets", name, offsets)
        if self._get(name)["state"] != "STOPPED":
            raise BadRequestError("Connectors must be in the STOPPED state before their offsets can be modified.")
        self.offsets[name] = offsets
        return "The offsets for this connector have been altered successfully"

    async def reset_connector_offsets(self, name: str) -> str:
        self._record("reset_connector_offsets", name)
        self._get(name)
        self.offsets.pop(name, None)
        return "The offsets for this connector have been reset successfully"

    async def connector_active_topics(self, name: str) -> dict[str, Any]:
        self._record("connector_active_topics", name)
        self._get(name)
        return {name: {"topics": ["a.topic1"]}}

    async def reset_connector_active_topics(self, name: str) -> None:
        self._record("reset_connector_active_topics", name)
        self._get(name)

    async def connector_plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        self._record("connector_plugins", connectors_only=connectors_only)
        plugins = [{"class": "connectors.mirror.MirrorSourceConnector", "type": "source", "version": "0.1.0"}]
        if not connectors_only:
            plugins.append({"class": "mirrorline.converters.ByteArrayConverter", "type": "converter"})
        return plugins

    async def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        self._record("plugin_config", plugin)
        if plugin != "MirrorSourceConnector":
            raise NotFoundError(f"Unknown plugin {plugin}.")
        return [{"name": "topics", "type": "LIST", "required": False, "default_value": ".*",
                 "importance": "HIGH", "documentation": "Topics to replicate.", "group": None, "order": -1,
                 "width": "NONE", "display_name": "topics", "dependents": []}]

    async def validate_connector_config(self, plugin: str, config: dict[str, Any]) -> dict[str, Any]:
        self._record("validate_connector_config", plugin, config)
        return {"name": plugin, "error_count": 0, "groups": ["Common"], "configs": []}


MIRROR = {"connector.class": "MirrorSourceConnector", "source.cluster.alias": "A", "tasks.max": "2"}


@pytest.fixture
def herder() -> FakeHerder:
    """A fresh fake herder."""
    return FakeHerder()


@pytest.fixture
async def client(herder: FakeHerder) -> TestClient:
    """A test client of the REST app over ``herder`` (logger clock fixed at 1234 ms)."""
    app = create_app(herder, worker_id=WORKER)
    app[LOGGERS] = Loggers(clock_ms=lambda: 1234)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def create(client: TestClient, name: str = "mirror", **config: Any) -> aiohttp.ClientResponse:
    """POST /connectors with MIRROR's config (overridden by ``config``)."""
    return await client.post("/connectors", json={"name": name, "config": {**MIRROR, **config}})


async def assert_error(resp: aiohttp.ClientResponse, status: int, fragment: str = "") -> str:
    """Check a Connect error response and return its message."""
    assert resp.status == status, await resp.text()
    assert resp.content_type == "application/json"
    body = await resp.json()
    assert set(body) == {"error_code", "message"}
    assert body["error_code"] == status
    assert fragment in body["message"]
    return body["message"]


# -- worker ----------------------------------------------------------------------------------

async def test_server_info(client: TestClient) -> None:
    resp = await client.get("/")
    assert resp.status == 200
    assert await resp.json() == {"version": "0.1.0", "commit": "abc123", "kafka_cluster_id": "cluster-1"}


@pytest.mark.parametrize(("state", "status"), [("healthy", 200), ("starting", 503), ("unhealthy", 500)])
async def test_health(client: TestClient, herder: FakeHerder, state: str, status: int) -> None:
    herder.health_state = (state, "why")
    resp = await client.get("/health")
    assert resp.status == status
    assert await resp.json() == {"status": state, "message": "why"}


# -- creating and configuring connectors -----------------------------------------------------

async def test_create_connector(client: TestClient, herder: FakeHerder) -> None:
    resp = await client.post("/connectors", json={"name": " mirror ", "config": MIRROR, "initial_state": "paused"})
    assert resp.status == 201
    assert resp.headers["Location"] == "/connectors/mirror"
    body = await resp.json()
    assert body == {"name": "mirror", "config": {**MIRROR, "name": "mirror"},
                    "tasks": [{"connector": "mirror", "task": 0}, {"connector": "mirror", "task": 1}],
                    "type": "source"}
    assert herder.calls[-1] == ("put_connector_config", ("mirror", {**MIRROR, "name": "mirror"}),
                                {"allow_replace": False, "initial_state": "PAUSED"})


async def test_create_location_is_encoded(client: TestClient) -> None:
    resp = await create(client, "a b/c")
    assert resp.status == 201
    assert resp.headers["Location"] == "/connectors/a%20b%2Fc"
    resp = await client.get(resp.headers["Location"])
    assert resp.status == 200
    assert (await resp.json())["name"] == "a b/c"


async def test_create_coerces_scalar_config_values_to_strings(client: TestClient, herder: FakeHerder) -> None:
    resp = await client.post("/connectors", json={"name": "m", "config": {**MIRROR, "tasks.max": 4,
                                                                          "sync.topic.acls.enabled": False}})
    assert resp.status == 201
    config = herder.calls[-1][1][1]
    assert config["tasks.max"] == "4" and config["sync.topic.acls.enabled"] == "false"


async def test_create_existing_is_409(client: TestClient) -> None:
    assert (await create(client)).status == 201
    await assert_error(await create(client), 409, "already exists")


async def test_create_invalid_config_is_400_from_herder(client: TestClient) -> None:
    resp = await client.post("/connectors", json={"name": "m", "config": {"tasks.max": "1"}})
    await assert_error(resp, 400, "Connector configuration is invalid and contains the following 1 error(s):")


@pytest.mark.parametrize(("body", "fragment"), [
    ([1, 2], "Request body must be a JSON object, not an array"),
    ({"config": MIRROR}, "Connector name is required"),
    ({"name": "  ", "config": MIRROR}, "Connector name is required"),
    ({"name": 7, "config": MIRROR}, "not a number"),
    ({"name": "m"}, "'config' is missing"),
    ({"name": "m", "config": ["a"]}, "'config' must be a JSON object, not an array"),
    ({"name": "m", "config": "x=y"}, "'config' must be a JSON object, not a string"),
    ({"name": "m", "config": {**MIRROR, "topics": ["a"]}}, "the value of 'topics' must be a string"),
    ({"name": "m", "config": {**MIRROR, "name": "other"}},
     "Connector name configuration (other) doesn't match connector name in the URL (m)"),
    ({"name": "m", "config": MIRROR, "initial_state": "SLEEPING"}, "'initial_state' must be one of"),
])
async def test_create_wrong_shape_is_400(client: TestClient, herder: FakeHerder, body: Any, fragment: str) -> None:
    await assert_error(await client.post("/connectors", json=body), 400, fragment)
    assert not herder.calls


@pytest.mark.parametrize("data", [b'{"name": "m", "config": {', b"not json", b"{'name': 'm'}", b"NaN"])
async def test_malformed_json_is_400(client: TestClient, herder: FakeHerder, data: bytes) -> None:
    resp = await client.post("/connectors", data=data, headers={"Content-Type": "application/json"})
    message = await assert_error(resp, 400, "Request body is not valid JSON: ")
    assert len(message) > len("Request body is not valid JSON: ")
    assert not herder.calls


async def test_empty_body_is_400(client: TestClient) -> None:
    await assert_error(await client.put("/connectors/m/config"), 400, "Request body is empty")


async def test_get_connector_and_config(client: TestClient) -> None:
    await create(client)
    resp = await client.get("/connectors/mirror")
    assert resp.status == 200
    assert (await resp.json())["name"] == "mirror"
    resp = await client.get("/connectors/mirror/config")
    assert resp.status == 200
    assert await resp.json() == {**MIRROR, "name": "mirror"}


async def test_unknown_connector_is_404(client: TestClient) -> None:
    for method, path in [("GET", "/connectors/nope"), ("GET", "/connectors/nope/status"),
                         ("DELETE", "/connectors/nope"), ("PUT", "/connectors/nope/pause"),
                         ("GET", "/connectors/nope/offsets")]:
        await assert_error(await client.request(method, path), 404, "Connector nope not found")


async def test_put_config_creates_then_replaces(client: TestClient, herder: FakeHerder) -> None:
    resp = await client.put("/connectors/mirror/config", json=MIRROR)
    assert resp.status == 201
    assert resp.headers["Location"] == "/connectors/mirror"
    assert herder.calls[-1][1] == ("mirror", {**MIRROR, "name": "mirror"})
    assert herder.calls[-1][2]["allow_replace"] is True
    resp = await client.put("/connectors/mirror/config", json={**MIRROR, "name": "mirror", "tasks.max": "4"})
    assert resp.status == 200
    assert "Location" not in resp.headers
    assert (await resp.json())["config"]["tasks.max"] == "4"


async def test_put_config_name_mismatch_is_400(client: TestClient, herder: FakeHerder) -> None:
    resp = await client.put("/connectors/mirror/config", json={**MIRROR, "name": "other"})
    await assert_error(resp, 400, "Connector name configuration (other) doesn't match connector name in the URL")
    assert not herder.calls


@pytest.mark.parametrize("body", [b'[{"a": "b"}]', b'"text"', b"3", b"null"])
async def test_put_config_not_an_object_is_400(client: TestClient, body: bytes) -> None:
    resp = await client.put("/connectors/mirror/config", data=body)
    await assert_error(resp, 400, "Connector configuration must be a JSON object")


async def test_patch_config(client: TestClient, herder: FakeHerder) -> None:
    await create(client)
    resp = await client.patch("/connectors/mirror/config", json={"tasks.max": 8, "source.cluster.alias": None})
    assert resp.status == 200
    config = (await resp.json())["config"]
    assert config["tasks.max"] == "8" and "source.cluster.alias" not in config
    assert herder.calls[-1][1] == ("mirror", {"tasks.max": "8", "source.cluster.alias": None})
    await assert_error(await client.patch("/connectors/mirror/config", json={"name": "x"}), 400, "doesn't match")
    await assert_error(await client.patch("/connectors/nope/config", json={"a": "b"}), 404)


async def test_delete_connector(client: TestClient) -> None:
    await create(client)
    resp = await client.delete("/connectors/mirror")
    assert resp.status == 204
    await assert_error(await client.get("/connectors/mirror"), 404)


# -- listing ---------------------------------------------------------------------------------

async def test_list_connectors(client: TestClient) -> None:
    resp = await client.get("/connectors")
    assert resp.status == 200 and await resp.json() == []
    await create(client, "b")
    await create(client, "a")
    assert await (await client.get("/connectors")).json() == ["a", "b"]


async def test_list_connectors_expanded(client: TestClient, herder: FakeHerder) -> None:
    await create(client, "a")
    await create(client, "b")
    body = await (await client.get("/connectors?expand=status")).json()
    assert set(body) == {"a", "b"}
    assert body["a"] == {"status": herder._status("a")}
    body = await (await client.get("/connectors?expand=info")).json()
    assert body["b"] == {"info": herder._info("b")}
    body = await (await client.get("/connectors", params=[("expand", "status"), ("expand", "info")])).json()
    assert body["a"] == {"status": herder._status("a"), "info": herder._info("a")}
    assert await (await client.get("/connectors?expand=bogus")).json() == {"a": {}, "b": {}}


async def test_list_connectors_skips_connector_deleted_meanwhile(client: TestClient, herder: FakeHerder) -> None:
    await create(client, "a")
    await create(client, "b")
    herder.vanish_on_status = "a"
    assert set(await (await client.get("/connectors?expand=status")).json()) == {"b"}


# -- status, tasks, lifecycle ----------------------------------------------------------------

async def test_status_and_tasks(client: TestClient, herder: FakeHerder) -> None:
    await create(client)
    resp = await client.get("/connectors/mirror/status")
    assert resp.status == 200
    assert await resp.json() == herder._status("mirror")
    resp = await client.get("/connectors/mirror/tasks")
    assert resp.status == 200
    assert await resp.json() == [{"id": {"connector": "mirror", "task": i}, "config": {"task.index": str(i)}}
                                 for i in range(2)]
    resp = await client.get("/connectors/mirror/tasks/1/status")
    assert resp.status == 200
    assert await resp.json() == {"id": 1, "state": "RUNNING", "worker_id": WORKER}
    assert herder.calls[-1] == ("task_status", ("mirror", 1), {})
    await assert_error(await client.get("/connectors/mirror/tasks/7/status"), 404, "Task mirror-7 not found")
    await assert_error(await client.get("/connectors/mirror/tasks/x/status"), 404, "HTTP 404 Not Found")


async def test_restart_connector(client: TestClient, herder: FakeHerder) -> None:
    await create(client)
    resp = await client.post("/connectors/mirror/restart")
    assert resp.status == 204
    assert herder.calls[-1][2] == {"include_tasks": False, "only_failed": False}
    resp = await client.post("/connectors/mirror/restart?includeTasks=true&onlyFailed=TRUE")
    assert resp.status == 202
    assert herder.calls[-1][2] == {"include_tasks": True, "only_failed": True}
    body = await resp.json()
    assert body["connector"]["state"] == "RESTARTING"
    assert [t["state"] for t in body["tasks"]] == ["RESTARTING", "RESTARTING"]
    await assert_error(await client.post("/connectors/nope/restart"), 404)


async def test_restart_task(client: TestClient, herder: FakeHerder) -> None:
    await create(client)
    resp = await client.post("/connectors/mirror/tasks/0/restart")
    assert resp.status == 204
    assert herder.calls[-1] == ("restart_task", ("mirror", 0), {})
    await assert_error(await client.post("/connectors/mirror/tasks/5/restart"), 404)


async def test_pause_resume_stop(client: TestClient, herder: FakeHerder) -> None:
    await create(client)
    resp = await client.put("/connectors/mirror/pause")
    assert resp.status == 202 and await resp.read() == b""
    assert herder.connectors_["mirror"]["state"] == "PAUSED"
    resp = await client.put("/connectors/mirror/resume")
    assert resp.status == 202
    assert herder.connectors_["mirror"]["state"] == "RUNNING"
    resp = await client.put("/connectors/mirror/stop")
    assert resp.status == 204
    assert herder.connectors_["mirror"]["state"] == "STOPPED"


async def test_topics(client: TestClient) -> None:
    await create(client)
    resp = await client.get("/connectors/mirror/topics")
    assert resp.status == 200
    assert await resp.json() == {"mirror": {"topics": ["a.topic1"]}}
    resp = await client.put("/connectors/mirror/topics/reset")
    assert resp.status == 202


# -- offsets ---------------------------------------------------------------------------------

OFFSET = {"partition": {"cluster": "A", "topic": "t", "partition": 0}, "offset": {"offset": 41}}


async def test_offsets(client: TestClient, herder: FakeHerder) -> None:
    await create(client)
    resp = await client.get("/connectors/mirror/offsets")
    assert resp.status == 200 and await resp.json() == {"offsets": []}
    await assert_error(await client.patch("/connectors/mirror/offsets", json={"offsets": [OFFSET]}), 400,
                       "STOPPED")
    await client.put("/connectors/mirror/stop")
    removal = {"partition": {"cluster": "A", "topic": "t", "partition": 1}, "offset": None}
    resp = await client.patch("/connectors/mirror/offsets", json={"offsets": [OFFSET, removal]})
    assert resp.status == 200
    assert await resp.json() == {"message": "The offsets for this connector have been altered successfully"}
    assert herder.calls[-1] == ("alter_connector_offsets", ("mirror", [OFFSET, removal]), {})
    assert await (await client.get("/connectors/mirror/offsets")).json() == {"offsets": [OFFSET, removal]}
    resp = await client.delete("/connectors/mirror/offsets")
    assert resp.status == 200
    assert await resp.json() == {"message": "The offsets for this connector have been reset successfully"}


@pytest.mark.parametrize(("body", "fragment"), [
    ({}, "Partitions / offsets need to be provided"),
    ({"offsets": []}, "Partitions / offsets need to be provided"),
    ({"offsets": {"a": 1}}, "'offsets' must be a JSON array, not an object"),
    ({"offsets": [5]}, "offsets[0] must be a JSON object, not a number"),
    ({"offsets": [OFFSET, {"offset": None}]}, "offsets[1].partition must be a JSON object, not null"),
    ({"offsets": [{"partition": {"a": 1}}]}, "offsets[0].offset is missing"),
    ({"offsets": [{"partition": {"a": 1}, "offset": 5}]}, "offsets[0].offset must be a JSON object or null"),
])
async def test_alter_offsets_wrong_shape_is_400(client: TestClient, herder: FakeHerder, body: Any,
                                                fragment: str) -> None:
    await assert_error(await client.patch("/connectors/mirror/offsets", json=body), 400, fragment)
    assert not herder.calls


# -- plugins ---------------------------------------------------------------------------------

async def test_connector_plugins(client: TestClient, herder: FakeHerder) -> None:
    resp = await client.get("/connector-plugins")
    assert resp.status == 200
    assert len(await resp.json()) == 1
    assert herder.calls[-1][2] == {"connectors_only": True}
    resp = await client.get("/connector-plugins?connectorsOnly=false")
    assert [p["type"] for p in await resp.json()] == ["source", "converter"]
    assert herder.calls[-1][2] == {"connectors_only": False}


async def test_plugin_config_and_validate(client: TestClient, herder: FakeHerder) -> None:
    resp = await client.get("/connector-plugins/MirrorSourceConnector/config")
    assert resp.status == 200
    assert (await resp.json())[0]["name"] == "topics"
    await assert_error(await client.get("/connector-plugins/Nope/config"), 404, "Unknown plugin Nope.")
    resp = await client.put("/connector-plugins/MirrorSourceConnector/config/validate", json={**MIRROR, "x": 1})
    assert resp.status == 200
    assert (await resp.json())["error_count"] == 0
    assert herder.calls[-1][1] == ("MirrorSourceConnector", {**MIRROR, "x": "1"})
    resp = await client.put("/connector-plugins/MirrorSourceConnector/config/validate", json=[1])
    await assert_error(resp, 400, "must be a JSON object")


# -- admin/loggers ---------------------------------------------------------------------------

@pytest.fixture
def namespace() -> str:
    """A fresh logger namespace with one child logger; levels are cleared afterwards."""
    name = f"mirrorline.resttest.{uuid.uuid4().hex}"
    logging.getLogger(name + ".child")
    yield name
    for logger_name in (name, name + ".child", name + ".child.grandchild"):
        logging.getLogger(logger_name).setLevel(logging.NOTSET)


async def test_set_and_read_logger_level(client: TestClient, namespace: str) -> None:
    resp = await client.put(f"/admin/loggers/{namespace}", json={"level": "debug"})
    assert resp.status == 200
    assert await resp.json() == [namespace, namespace + ".child"]
    assert logging.getLogger(namespace + ".child").level == logging.DEBUG
    resp = await client.get(f"/admin/loggers/{namespace}.child")
    assert resp.status == 200
    assert await resp.json() == {"level": "DEBUG", "last_modified": 1234}
    all_levels = await (await client.get("/admin/loggers")).json()
    assert all_levels[namespace] == {"level": "DEBUG", "last_modified": 1234}
    assert "root" in all_levels and set(all_levels["root"]) == {"level", "last_modified"}
    resp = await client.put(f"/admin/loggers/{namespace}.child", json={"level": "WARNING"})
    assert await resp.json() == [namespace + ".child"]
    assert (await (await client.get(f"/admin/loggers/{namespace}.child")).json())["level"] == "WARN"


async def test_logger_without_own_level_reports_effective_level(client: TestClient, namespace: str) -> None:
    logging.getLogger(namespace).setLevel(logging.ERROR)
    logging.getLogger(namespace + ".child.grandchild")
    resp = await client.get(f"/admin/loggers/{namespace}.child.grandchild")
    assert await resp.json() == {"level": "ERROR", "last_modified": None}
    assert f"{namespace}.child.grandchild" not in await (await client.get("/admin/loggers")).json()


async def test_root_logger_level(client: TestClient) -> None:
    resp = await client.get("/admin/loggers/ROOT")
    assert resp.status == 200
    assert set(await resp.json()) == {"level", "last_modified"}


async def test_logger_errors(client: TestClient, namespace: str) -> None:
    await assert_error(await client.put(f"/admin/loggers/{namespace}", json={"level": "LOUD"}), 404,
                       "invalid log level 'LOUD'.")
    await assert_error(await client.put(f"/admin/loggers/{namespace}", json={"lvl": "DEBUG"}), 400,
                       "Desired 'level' parameter was not specified in request.")
    await assert_error(await client.put(f"/admin/loggers/{namespace}", data=b"{"), 400, "not valid JSON")
    await assert_error(await client.put(f"/admin/loggers/{namespace}?scope=cluster", json={"level": "INFO"}), 400,
                       "scope=cluster")
    await assert_error(await client.get(f"/admin/loggers/{namespace}.nothing.here"), 404,
                       f"Logger {namespace}.nothing.here not found.")
    assert logging.getLogger(namespace).level == logging.NOTSET


# -- generic errors --------------------------------------------------------------------------

async def test_unknown_path_is_404_json(client: TestClient) -> None:
    await assert_error(await client.get("/no/such/path"), 404, "HTTP 404 Not Found")


async def test_wrong_method_is_405_json(client: TestClient) -> None:
    resp = await client.post("/connectors/mirror/status")
    await assert_error(resp, 405, "HTTP 405 Method Not Allowed")
    assert "GET" in resp.headers["Allow"]
    await assert_error(await client.delete("/connectors"), 405)


async def test_rebalance_is_409(client: TestClient, herder: FakeHerder) -> None:
    herder.fail_with = RebalanceInProgressError("Cannot complete request momentarily due to rebalance")
    await assert_error(await client.get("/connectors"), 409, "rebalance")


async def test_unexpected_exception_is_500_json(client: TestClient, herder: FakeHerder,
                                                caplog: pytest.LogCaptureFixture) -> None:
    herder.fail_with = RuntimeError("the disk is on fire")
    with caplog.at_level(logging.ERROR, logger="mirrorline.rest.app"):
        await assert_error(await client.get("/connectors"), 500, "the disk is on fire")
    assert any(r.exc_info and "GET /connectors" in r.getMessage() for r in caplog.records)


# -- OpenAPI and the server ------------------------------------------------------------------

async def test_openapi_lists_every_route(client: TestClient) -> None:
    resp = await client.get("/openapi.json")
    assert resp.status == 200
    doc = await resp.json()
    assert doc["openapi"].startswith("3.")
    registered = registered_operations(client.app)
    assert len(registered) == len(OPERATIONS) == 37
    for method, path in registered:
        assert method.lower() in doc["paths"][path], (method, path)
        assert (method, path) in OPERATIONS, f"no hand-written OpenAPI entry for {method} {path}"
    assert set(OPERATIONS) == set(registered), "OPERATIONS names a route that is not served"
    task_status = doc["paths"]["/connectors/{connector}/tasks/{task}/status"]["get"]
    assert {p["name"] for p in task_status["parameters"]} == {"connector", "task"}


async def test_extra_routes_are_served_and_documented(herder: FakeHerder) -> None:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text="up 1\n")

    app = create_app(herder, extra_routes=[web.get("/extra/metrics", metrics)])
    async with TestClient(TestServer(app)) as test_client:
        assert await (await test_client.get("/extra/metrics")).text() == "up 1\n"
        doc = await (await test_client.get("/openapi.json")).json()
        assert "get" in doc["paths"]["/extra/metrics"]
        await assert_error(await test_client.post("/extra/metrics"), 405)


async def test_rest_server_on_port_zero(herder: FakeHerder) -> None:
    server = RestServer(herder, worker_id=WORKER)
    await server.start("127.0.0.1", 0)
    try:
        assert server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as session:
            async with session.get(server.url + "/") as resp:
                assert resp.status == 200
                assert (await resp.json())["version"] == "0.1.0"
    finally:
        await server.stop()
    await server.stop()
    with pytest.raises(RuntimeError):
        _ = server.port


async def test_metrics_endpoint_serves_prometheus_text():
    from prometheus_client import Counter

    counter = Counter("mirrorline_test_rest_metrics_probe", "A probe counter for this test.")
    counter.inc(3)
    async with TestClient(TestServer(create_app(FakeHerder()))) as test_client:
        response = await test_client.get("/metrics")
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        assert "mirrorline_test_rest_metrics_probe_total 3.0" in await response.text()
