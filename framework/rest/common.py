"""Helpers shared by the REST route modules: app keys, JSON in and out, request parsing.

Parsing problems raise :class:`~mirrorline.api.errors.BadRequestError`, which the error
middleware in :mod:`mirrorline.rest.app` turns into Connect's ``{"error_code", "message"}``
body with status 400, exactly as it does for the herder's own errors.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from mirrorline.api.errors import BadRequestError
from mirrorline.api.rest_extension import json_type  # noqa: F401 - the routes import it from here
from mirrorline.rest.loggers import Loggers
from mirrorline.runtime.herder import Herder

HERDER: web.AppKey[Herder] = web.AppKey("herder", Herder)
"""The :class:`Herder` every handler delegates to."""

LOGGERS: web.AppKey[Loggers] = web.AppKey("loggers", Loggers)
"""The worker's :class:`Loggers` (``/admin/loggers``)."""

WORKER_ID: web.AppKey[str | None] = web.AppKey("worker_id")
"""The worker id given to ``create_app`` (for extra routes and log lines; may be None)."""


def dumps(data: Any) -> str:
    """Serialise ``data`` as compact JSON, as Connect's Jackson writer does."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def json_response(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """An ``application/json`` response carrying ``data``."""
    return web.json_response(data, status=status, headers=headers, dumps=dumps)


def error_response(status: int, message: str, *, headers: dict[str, str] | None = None) -> web.Response:
    """Connect's error entity: ``{"error_code": status, "message": message}``."""
    return json_response({"error_code": status, "message": message}, status=status, headers=headers)


# aiohttp 3.12+ has typed request keys; older ones take the plain string
BODY: Any = web.RequestKey("mirrorline.body", bytes) if hasattr(web, "RequestKey") else "mirrorline.body"
"""Where :func:`read_body` keeps the bytes it read, in the request's own storage."""

DEFAULT_MAX_BODY = 1024 * 1024
"""``rest.request.max.bytes`` when the herder has no worker config (tests with a fake herder)."""

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects a request body may have (Connect's bodies need 4)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def max_body_bytes(request: web.Request) -> int:
    """The worker's ``rest.request.max.bytes`` (the largest request body it reads)."""
    worker_config = getattr(request.app.get(HERDER), "worker_config", None)
    try:
        return int(worker_config["rest.request.max.bytes"])
    except (TypeError, KeyError, ValueError):
        return DEFAULT_MAX_BODY


def _too_large(limit: int, size: int | None) -> web.HTTPRequestEntityTooLarge:
    sized = f"of {size} bytes " if size else ""
    return web.HTTPRequestEntityTooLarge(
        max_size=limit, actual_size=size or limit + 1,
        text=f"Request body {sized}is larger than rest.request.max.bytes ({limit} bytes)")


async def read_body(request: web.Request) -> bytes:
    """The raw request body; 413 as soon as it is known to exceed ``rest.request.max.bytes``.

    A declared ``Content-Length`` over the limit is refused without reading anything; a
    chunked body is read only up to the limit.
    """
    limit = max_body_bytes(request)
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit, request.content_length)
    chunks, size = [], 0
    while True:
        chunk = await request.content.read(64 * 1024)
        if not chunk:
            break
        size += len(chunk)
        if size > limit:
            raise _too_large(limit, None)
        chunks.append(chunk)
    body = b"".join(chunks)
    request[BODY] = body  # the stream is used up: a request forwarded to another worker sends these bytes
    return body


def _check_depth(value: Any) -> None:
    """BadRequestError if ``value`` nests arrays/objects deeper than :data:`MAX_JSON_DEPTH`."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > MAX_JSON_DEPTH:
            raise BadRequestError(f"Request body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep")
        stack.extend((child, depth + 1) for child in children)


async def read_json(request: web.Request) -> Any:
    """The request body parsed as JSON; 400 if it is empty, not valid JSON or nested too deep,
    413 if larger than ``rest.request.max.bytes``."""
    raw = await read_body(request)
    if not raw.strip():
        raise BadRequestError("Request body is empty; a JSON document is required")
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:  # the parser recursed once per level of a very deep document
        raise BadRequestError(
            f"Request body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise BadRequestError(f"Request body is not valid JSON: {exc}") from None
    _check_depth(value)
    return value


def require_object(value: Any, what: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else BadRequestError naming ``what``."""
    if not isinstance(value, dict):
        raise BadRequestError(f"{what} must be a JSON object, not {json_type(value)}")
    return value


def config_map(value: Any, what: str) -> dict[str, str | None]:
    """A connector config as Connect reads it (``Map<String, String>``).

    Strings stay as they are, numbers and booleans become their JSON text (``10`` → ``"10"``,
    ``true`` → ``"true"``), null stays None; a nested object or array is a 400.
    """
    config = require_object(value, what)
    out: dict[str, str | None] = {}
    for key, item in config.items():
        if item is None or isinstance(item, str):
            out[key] = item
        elif isinstance(item, (bool, int, float)):
            out[key] = json.dumps(item)
        else:
            raise BadRequestError(
                f"{what}: the value of '{key}' must be a string, number, boolean or null, not {json_type(item)}")
    return out


def query_flag(request: web.Request, name: str, default: bool) -> bool:
    """A boolean query parameter: ``true`` or ``false`` (any case); anything else is a 400 (JAX-RS
    would read it as false, silently)."""
    values = request.query.getall(name, [])
    if not values:
        return default
    flags = {value.strip().lower() for value in values}
    if not flags <= {"true", "false"} or len(flags) > 1:
        raise BadRequestError(f"Query parameter {name} must be true or false, not {', '.join(values)!r}")
    return flags == {"true"}
