"""``/connector-plugins`` routes: the installed plugins, their config definitions, validation."""

from __future__ import annotations

from aiohttp import web

from mirrorline.rest.common import HERDER, config_map, json_response, query_flag, read_json

routes = web.RouteTableDef()


@routes.get("/connector-plugins")
async def list_plugins(request: web.Request) -> web.Response:
    """PluginInfo list; ``?connectorsOnly=false`` adds converters, transformations etc."""
    connectors_only = query_flag(request, "connectorsOnly", True)
    return json_response(await request.app[HERDER].connector_plugins(connectors_only=connectors_only))


@routes.get("/connector-plugins/{plugin}/config")
async def plugin_config(request: web.Request) -> web.Response:
    """ConfigKeyInfo list of a plugin."""
    return json_response(await request.app[HERDER].plugin_config(request.match_info["plugin"]))


@routes.put("/connector-plugins/{plugin}/config/validate")
async def validate_config(request: web.Request) -> web.Response:
    """ConfigInfos for a config map (validation errors are in the body, status 200)."""
    config = config_map(await read_json(request), "Connector configuration")
    return json_response(await request.app[HERDER].validate_connector_config(request.match_info["plugin"], config))
