"""Worker-level routes: ``GET /`` (ServerInfo), ``GET /health`` and ``GET /openapi.json``."""

from __future__ import annotations

from aiohttp import web

from mirrorline.rest.common import HERDER, json_response
from mirrorline.rest.openapi import build_openapi

routes = web.RouteTableDef()

HEALTH_STATUS = {"healthy": 200, "starting": 503, "unhealthy": 500}
"""HTTP status of each herder health state (KIP-1017); anything else is reported as 500."""


@routes.get("/", name="server-info")
async def server_info(request: web.Request) -> web.Response:
    """ServerInfo ``{"version", "commit", "kafka_cluster_id"}``."""
    return json_response(await request.app[HERDER].server_info())


@routes.get("/health", name="health")
async def health(request: web.Request) -> web.Response:
    """``{"status", "message"}``: 200 healthy, 503 starting, 500 unhealthy."""
    status, message = await request.app[HERDER].health()
    return json_response({"status": status, "message": message}, status=HEALTH_STATUS.get(status, 500))


@routes.get("/openapi.json", name="openapi")
async def openapi(request: web.Request) -> web.Response:
    """The OpenAPI 3 document of every route this app serves."""
    return json_response(build_openapi(request.app))


@routes.get("/metrics", name="metrics")
async def metrics(request: web.Request) -> web.Response:
    """Every metric of this process (workers, tasks, connectors) in Prometheus text format."""
    from mirrorline.runtime.metrics import exposition

    body, content_type = await exposition()
    return web.Response(body=body, headers={"Content-Type": content_type})
