"""``/admin/loggers`` routes (KIP-495), backed by :class:`mirrorline.rest.loggers.Loggers`."""

from __future__ import annotations

import logging

from aiohttp import web

from mirrorline.api.errors import BadRequestError, NotFoundError
from mirrorline.rest.common import LOGGERS, json_response, read_json, require_object
from mirrorline.rest.loggers import parse_level

log = logging.getLogger(__name__)

routes = web.RouteTableDef()

WORKER_SCOPE = "worker"
CLUSTER_SCOPE = "cluster"


@routes.get("/admin/loggers")
async def all_levels(request: web.Request) -> web.Response:
    """``{logger: {"level", "last_modified"}}`` for loggers with a level of their own, plus root."""
    return json_response(request.app[LOGGERS].all_levels())


@routes.get("/admin/loggers/{logger}")
async def get_level(request: web.Request) -> web.Response:
    """LoggerLevel of one logger; 404 if no such logger exists."""
    name = request.match_info["logger"]
    level = request.app[LOGGERS].level(name)
    if level is None:
        raise NotFoundError(f"Logger {name} not found.")
    return json_response(level)


@routes.put("/admin/loggers/{logger}")
async def set_level(request: web.Request) -> web.Response:
    """Set a namespace's level from ``{"level": "DEBUG"}``: 200 with the affected logger names.

    400 when ``level`` is missing, 404 when it is not a level name (as Connect). Only
    ``?scope=worker`` (the default) is supported; ``cluster`` is a 400, other scopes fall
    back to ``worker`` with a warning, as in Connect.
    """
    namespace = request.match_info["logger"]
    body = require_object(await read_json(request), "Request body")
    level_text = body.get("level")
    if level_text is None:
        raise BadRequestError("Desired 'level' parameter was not specified in request.")
    level = parse_level(level_text) if isinstance(level_text, str) else None
    if level is None:
        raise NotFoundError(f"invalid log level '{level_text}'.")
    scope = request.query.get("scope", WORKER_SCOPE).lower()
    if scope == CLUSTER_SCOPE:
        raise BadRequestError("scope=cluster is not supported by this worker yet; use scope=worker")
    if scope != WORKER_SCOPE:
        log.warning("Received invalid scope '%s' in request to adjust logging level; will default to %s",
                    scope, WORKER_SCOPE)
    return json_response(request.app[LOGGERS].set_level(namespace, level))
