"""The REST layer forwards what the herder says another worker must carry out (the herder never speaks HTTP).

Two real aiohttp servers on loopback: a "follower" whose herder raises NotLeaderError naming the
"leader", and the leader, a plain FakeHerder. The request must arrive at the leader as it was
sent (method, path, query, body, Authorization), marked ``forward=false``, and its answer must
come back unchanged; a request already forwarded is answered 409, never forwarded again.
"""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from mirrorline.rest import create_app
from mirrorline.rest.forwarding import WorkerClient
from mirrorline.runtime.herder import NotAssignedError, NotLeaderError
from test_rest_api import FakeHerder  # same folder: on sys.path under pytest


class ElsewhereHerder(FakeHerder):
    """Refuses writes the way a non-leader DistributedHerder does, naming ``leader_url``."""

    def __init__(self, leader_url: str) -> None:
        super().__init__()
        self.leader_url = leader_url

    async def put_connector_config(self, name, config, *, allow_replace, initial_state=None):
        raise NotLeaderError("Only the leader can set connector configs", self.leader_url)

    async def restart_task(self, name, task):
        raise NotAssignedError(f"Task {name}-{task} runs on another worker", self.leader_url)


@pytest.fixture
async def pair():
    seen: list[tuple[str, str, str | None]] = []  # (method, path and query, Authorization) at the leader
    leader_app = create_app(FakeHerder())

    @web.middleware
    async def record(request, handler):
        seen.append((request.method, str(request.rel_url), request.headers.get("Authorization")))
        return await handler(request)

    leader_app.middlewares.insert(0, record)
    leader = TestClient(TestServer(leader_app))
    await leader.start_server()
    leader_url = str(leader.make_url("")).rstrip("/")
    forwarder = WorkerClient()
    follower = TestClient(TestServer(create_app(ElsewhereHerder(leader_url), forwarder=forwarder)))
    await follower.start_server()
    yield follower, leader, seen
    await follower.close()
    await leader.close()
    await forwarder.close()


async def test_a_write_reaches_the_leader_as_sent_and_its_answer_comes_back(pair):
    follower, leader, seen = pair
    body = {"name": "a b/c", "config": {"connector.class": "X", "tasks.max": "2"}}
    response = await follower.post("/connectors", json=body, headers={"Authorization": "Basic dTpw"})
    assert response.status == 201, await response.text()
    assert (await response.json())["name"] == "a b/c"
    method, target, authorization = seen[-1]
    assert (method, target, authorization) == ("POST", "/connectors?forward=false", "Basic dTpw")
    # the leader really holds it: the forwarded body arrived whole
    listed = await (await leader.get("/connectors/a%20b%2Fc/config")).json()
    assert listed["tasks.max"] == "2"


async def test_an_error_of_the_leader_comes_back_unchanged(pair):
    follower, _, _ = pair
    response = await follower.post("/connectors", json={"name": "x"})
    assert response.status == 400
    assert "config" in (await response.json())["message"]


async def test_a_restart_goes_to_the_owner_with_its_query(pair):
    follower, _, seen = pair
    await follower.post("/connectors", json={"name": "c", "config": {"connector.class": "X"}})
    response = await follower.post("/connectors/c/tasks/0/restart")
    assert response.status in (204, 404)  # the owner answered (the fake has no task 0 running)
    assert seen[-1][:2] == ("POST", "/connectors/c/tasks/0/restart?forward=false")


async def test_a_forwarded_request_is_never_forwarded_again(pair):
    follower, _, seen = pair
    before = len(seen)
    response = await follower.put("/connectors/c/config?forward=false", json={"connector.class": "X"})
    assert response.status == 409
    assert "conflicting operation" in (await response.json())["message"]
    assert len(seen) == before


async def test_without_a_forwarder_the_refusal_is_a_409():
    client = TestClient(TestServer(create_app(ElsewhereHerder("http://127.0.0.1:9"))))
    await client.start_server()
    try:
        response = await client.put("/connectors/c/config", json={"connector.class": "X"})
        assert response.status == 409
        assert "Only the leader" in (await response.json())["message"]
    finally:
        await client.close()
