"""Helpers shared by the REST route modules: app keys, JSON in and out, request parsing.

Parsing problems raise :class:`~framework.api.errors.BadRequestError`, which the error
middleware in :mod:`framework.rest.app` turns into Connect's ``{"error_code", "message"}``
body with status 400, exactly as it does for the herder's own errors.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from framework.api.errors import BadRequestError
from framework.rest.loggers import Loggers
from framework.runtime.herder import Herder

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


def json_type(value: Any) -> str:
    """How a JSON value's type reads in an error message ("an object", "an array", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


async def read_json(request: web.Request) -> Any:
    """The request body parsed as JSON; BadRequestError (400) if it is empty or not valid JSON."""
    raw = await request.read()
    if not raw.strip():
        raise BadRequestError("Request body is empty; a JSON document is required")
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise BadRequestError(f"Request body is not valid JSON: {exc}") from None


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
    """A boolean query parameter read as JAX-RS reads ``Boolean``: only ``true`` (any case) is true."""
    value = request.query.get(name)
    if value is None:
        return default
    return value.strip().lower() == "true"
