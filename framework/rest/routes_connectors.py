"""``/connectors`` routes: each parses the request, calls one herder method and maps the result.

Status codes follow Kafka Connect (``docs/rest-api.md``): 201 with ``Location`` on creation,
202 for pause/resume/topic reset and a restart with flags, 204 for void operations.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import quote

from aiohttp import web

from mirrorline.api.errors import BadRequestError, NotFoundError
from mirrorline.rest.common import HERDER, config_map, json_response, json_type, query_flag, read_json, require_object
from mirrorline.runtime.herder import Herder

log = logging.getLogger(__name__)

routes = web.RouteTableDef()

INITIAL_STATES = ("RUNNING", "PAUSED", "STOPPED")
"""Values ``initial_state`` may take in ``POST /connectors`` (any case)."""

_C = "/connectors/{connector}"
_TASK = _C + r"/tasks/{task:\d+}"


def _herder(request: web.Request) -> Herder:
    return request.app[HERDER]


def _name(request: web.Request) -> str:
    return request.match_info["connector"]


def _task(request: web.Request) -> int:
    return int(request.match_info["task"])


def location(name: str) -> str:
    """The ``Location`` of a connector: ``/connectors/<name>``, percent-encoded."""
    return "/connectors/" + quote(name, safe="")


MAX_NAME_LENGTH = 249
"""Longest connector name accepted at creation (Kafka's topic-name limit; Connect has none).

Far below aiohttp's 8190-byte request line even when every character is percent-encoded, so
every connector created can be read and deleted by URL."""

_FORBIDDEN = "\\u0000-\\u001f\\u007f-\\u009f\\u200e\\u200f\\u2028-\\u202e\\u2066-\\u2069\\ufeff"
NAME_PATTERN = f"^[^{_FORBIDDEN}]*[^\\s{_FORBIDDEN}][^{_FORBIDDEN}]*$"
"""The name rule as an ECMA-262 regular expression (OpenAPI ``pattern``): no control characters,
line/paragraph separators, bidirectional controls or BOM, and at least one non-blank character."""

_FORBIDDEN_CHAR = re.compile(f"[{_FORBIDDEN}]")

NAME_RULE = (f"a connector name must have 1 to {MAX_NAME_LENGTH} characters, at least one of them not blank, and no "
             "control characters (U+0000-U+001F, U+007F-U+009F), line or paragraph separators, bidirectional text "
             "controls or U+FEFF")


def check_new_name(name: Any) -> str:
    """The name a new connector gets (surrounding blanks removed); 400 stating the rule if it breaks it.

    Applies to names at creation only, so connectors created before the rule existed stay usable.
    """
    if not isinstance(name, str) or not name.strip():
        what = "missing" if name is None else (json_type(name) if not isinstance(name, str) else "empty")
        raise BadRequestError(f"Connector name is required: 'name' must be a non-empty string, not {what}")
    if len(name) > MAX_NAME_LENGTH:
        raise BadRequestError(f"Connector name is {len(name)} characters long; {NAME_RULE}")
    bad = _FORBIDDEN_CHAR.search(name)
    if bad:
        raise BadRequestError(f"Connector name contains U+{ord(bad.group()):04X} at position {bad.start()}; "
                              f"{NAME_RULE}")
    return name.strip()


def check_and_put_name(name: str, config: dict[str, Any]) -> None:
    """Connect's rule: a ``name`` in the config must equal ``name``; when absent it is added."""
    included = config.get("name")
    if included is None:
        config["name"] = name
    elif included != name:
        raise BadRequestError(
            f"Connector name configuration ({included}) doesn't match connector name in the URL ({name})")


def _accepted() -> web.Response:
    return web.Response(status=202)


def _no_content() -> web.Response:
    return web.Response(status=204)


@routes.get("/connectors", name="connectors")
async def list_connectors(request: web.Request) -> web.Response:
    """Connector names, or ``{name: {"status", "info"}}`` with ``?expand=status`` / ``?expand=info``."""
    herder = _herder(request)
    names = await herder.connectors()
    if "expand" not in request.query:
        return json_response(names)
    expansions = request.query.getall("expand")
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        try:
            entry: dict[str, Any] = {}
            for expansion in expansions:
                if expansion == "status":
                    entry["status"] = await herder.connector_status(name)
                elif expansion == "info":
                    entry["info"] = await herder.connector_info(name)
                else:
                    log.info("Ignoring unknown expansion type %s", expansion)
            out[name] = entry
        except NotFoundError:  # deleted while we looked it up: leave it out, as Connect does
            log.debug("Unable to get connector info for %s on this worker", name)
    return json_response(out)


@routes.post("/connectors")
async def create_connector(request: web.Request) -> web.Response:
    """Create a connector from ``{"name", "config", "initial_state"?}``: 201 + Location, ConnectorInfo."""
    body = require_object(await read_json(request), "Request body")
    name = check_new_name(body.get("name"))
    if "config" not in body:
        raise BadRequestError("Connector configuration is required: 'config' is missing")
    config = config_map(body["config"], "'config'")
    check_and_put_name(name, config)
    initial_state = body.get("initial_state")
    if initial_state is not None:
        if not isinstance(initial_state, str) or initial_state.upper() not in INITIAL_STATES:
            raise BadRequestError(f"'initial_state' must be one of {', '.join(INITIAL_STATES)}, not {initial_state!r}")
        initial_state = initial_state.upper()
    _, info = await _herder(request).put_connector_config(name, config, allow_replace=False,
                                                          initial_state=initial_state)
    return json_response(info, status=201, headers={"Location": location(name)})


@routes.get(_C, name="connector")
async def get_connector(request: web.Request) -> web.Response:
    """ConnectorInfo."""
    return json_response(await _herder(request).connector_info(_name(request)))


@routes.delete(_C)
async def delete_connector(request: web.Request) -> web.Response:
    """Delete the connector: 204."""
    await _herder(request).delete_connector(_name(request))
    return _no_content()


@routes.get(_C + "/config")
async def get_config(request: web.Request) -> web.Response:
    """The connector's config map."""
    return json_response(await _herder(request).connector_config(_name(request)))


@routes.put(_C + "/config")
async def put_config(request: web.Request) -> web.Response:
    """Create or replace: 201 + Location if created, else 200; ConnectorInfo."""
    name = _name(request)
    config = config_map(await read_json(request), "Connector configuration")
    check_and_put_name(name, config)
    try:
        check_new_name(name)
    except BadRequestError:
        if name not in await _herder(request).connectors():  # refused only when this PUT would create it
            raise
    created, info = await _herder(request).put_connector_config(name, config, allow_replace=True)
    if created:
        return json_response(info, status=201, headers={"Location": location(name)})
    return json_response(info)


@routes.patch(_C + "/config")
async def patch_config(request: web.Request) -> web.Response:
    """Merge a partial config (null removes a key): 200 ConnectorInfo."""
    name = _name(request)
    patch = config_map(await read_json(request), "Connector configuration patch")
    if "name" in patch and patch["name"] != name:
        raise BadRequestError(
            f"Connector name configuration ({patch['name']}) doesn't match connector name in the URL ({name})")
    return json_response(await _herder(request).patch_connector_config(name, patch))


@routes.get(_C + "/status")
async def get_status(request: web.Request) -> web.Response:
    """ConnectorStateInfo."""
    return json_response(await _herder(request).connector_status(_name(request)))


@routes.post(_C + "/restart")
async def restart_connector(request: web.Request) -> web.Response:
    """``?includeTasks&onlyFailed``: 204 for the connector alone, else 202 + ConnectorStateInfo."""
    result = await _herder(request).restart_connector(
        _name(request), include_tasks=query_flag(request, "includeTasks", False),
        only_failed=query_flag(request, "onlyFailed", False))
    return _no_content() if result is None else json_response(result, status=202)


@routes.put(_C + "/pause")
async def pause_connector(request: web.Request) -> web.Response:
    """Pause: 202."""
    await _herder(request).pause_connector(_name(request))
    return _accepted()


@routes.put(_C + "/resume")
async def resume_connector(request: web.Request) -> web.Response:
    """Resume a paused or stopped connector: 202."""
    await _herder(request).resume_connector(_name(request))
    return _accepted()


@routes.put(_C + "/stop")
async def stop_connector(request: web.Request) -> web.Response:
    """Stop (tasks shut down, config kept): 204."""
    await _herder(request).stop_connector(_name(request))
    return _no_content()


@routes.put(_C + "/fence")
async def fence_zombies(request: web.Request) -> web.Response:
    """Internal (KIP-618): fence the previous generation of a source connector's tasks; 204 once done."""
    await _herder(request).fence_zombies(_name(request))
    return _no_content()


@routes.get(_C + "/tasks")
async def get_tasks(request: web.Request) -> web.Response:
    """TaskInfo list."""
    return json_response(await _herder(request).task_configs(_name(request)))


@routes.get(_TASK + "/status")
async def get_task_status(request: web.Request) -> web.Response:
    """One task's state ``{"id", "state", "worker_id"[, "trace"]}``."""
    return json_response(await _herder(request).task_status(_name(request), _task(request)))


@routes.post(_TASK + "/restart")
async def restart_task(request: web.Request) -> web.Response:
    """Restart one task: 204."""
    await _herder(request).restart_task(_name(request), _task(request))
    return _no_content()


@routes.get(_C + "/topics")
async def get_topics(request: web.Request) -> web.Response:
    """``{name: {"topics": [...]}}``."""
    return json_response(await _herder(request).connector_active_topics(_name(request)))


@routes.put(_C + "/topics/reset")
async def reset_topics(request: web.Request) -> web.Response:
    """Forget the active topics: 202."""
    await _herder(request).reset_connector_active_topics(_name(request))
    return _accepted()


@routes.get(_C + "/offsets")
async def get_offsets(request: web.Request) -> web.Response:
    """ConnectorOffsets."""
    return json_response(await _herder(request).connector_offsets(_name(request)))


def parse_offsets(body: Any) -> list[dict[str, Any]]:
    """The ``[{"partition", "offset"}]`` list of a ConnectorOffsets body; 400 naming any problem."""
    body = require_object(body, "Request body")
    offsets = body.get("offsets")
    if offsets is None or offsets == []:
        raise BadRequestError("Partitions / offsets need to be provided for an alter offsets request")
    if not isinstance(offsets, list):
        raise BadRequestError(f"'offsets' must be a JSON array, not {json_type(offsets)}")
    parsed = []
    for i, entry in enumerate(offsets):
        entry = require_object(entry, f"offsets[{i}]")
        partition = entry.get("partition")
        if not isinstance(partition, dict):
            raise BadRequestError(f"offsets[{i}].partition must be a JSON object, not {json_type(partition)}")
        if "offset" not in entry:
            raise BadRequestError(f"offsets[{i}].offset is missing (use null to remove the offset)")
        offset = entry["offset"]
        if offset is not None and not isinstance(offset, dict):
            raise BadRequestError(f"offsets[{i}].offset must be a JSON object or null, not {json_type(offset)}")
        parsed.append({"partition": partition, "offset": offset})
    return parsed


@routes.patch(_C + "/offsets")
async def alter_offsets(request: web.Request) -> web.Response:
    """Write offsets of a stopped connector: 200 ``{"message"}``."""
    offsets = parse_offsets(await read_json(request))
    return json_response({"message": await _herder(request).alter_connector_offsets(_name(request), offsets)})


@routes.delete(_C + "/offsets")
async def reset_offsets(request: web.Request) -> web.Response:
    """Remove every offset of a stopped connector: 200 ``{"message"}``."""
    return json_response({"message": await _herder(request).reset_connector_offsets(_name(request))})
