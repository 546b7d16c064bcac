"""``GET /ui``: the status page is served by the REST app, self-contained, and kept out of OpenAPI."""

from __future__ import annotations

import re

from aiohttp.test_utils import TestClient, TestServer

from mirrorline.rest import create_app
from mirrorline.rest.openapi import registered_operations
from test_rest_api import FakeHerder  # same folder: on sys.path under pytest


async def get_page(client: TestClient):
    response = await client.get("/ui")
    return response, await response.text()


async def test_ui_serves_a_self_contained_html_page():
    async with TestClient(TestServer(create_app(FakeHerder()))) as client:
        response, body = await get_page(client)
        assert response.status == 200
        assert response.content_type == "text/html"
        assert response.charset == "utf-8"
        assert '<div id="app"' in body
        # nothing is loaded from elsewhere: no absolute URL at all, no src/href outside this server
        assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}", body, re.IGNORECASE), \
            re.findall(r"\S*https?://\S*", body)
        assert re.findall(r"""\b(?:src|href)\s*=\s*["']([^"']*)""", body, re.IGNORECASE) == ["data:,"]  # favicon
        # the polls use the existing REST endpoints, relative to where the page is served
        assert '"connectors?expand=status&expand=info"' in body and '"metrics"' in body


async def test_ui_content_security_policy_allows_only_its_own_inline_code():
    async with TestClient(TestServer(create_app(FakeHerder()))) as client:
        response, body = await get_page(client)
        csp = dict(part.strip().split(" ", 1) for part in response.headers["Content-Security-Policy"].split(";"))
        assert csp["default-src"] == "'none'"
        assert csp["connect-src"] == "'self'"
        assert csp["script-src"].startswith("'sha256-") and "unsafe" not in csp["script-src"]
        assert csp["style-src"].startswith("'sha256-") and "unsafe" not in csp["style-src"]
        assert body.count("<script>") == 1 and body.count("<style>") == 1


async def test_ui_answers_head_refuses_writes_and_is_described_in_openapi():
    app = create_app(FakeHerder())
    async with TestClient(TestServer(app)) as client:
        assert (await client.head("/ui")).status == 200
        response = await client.post("/ui")
        assert response.status == 405
        assert (await response.json())["error_code"] == 405
        assert set(response.headers["Allow"].split(",")) == {"GET", "HEAD"}
        doc = await (await client.get("/openapi.json")).json()
        assert set(doc["paths"]["/ui"]) == {"get"}
        assert ("GET", "/ui") in set(registered_operations(app))
