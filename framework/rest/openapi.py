"""The OpenAPI 3 document served at ``GET /openapi.json``.

The list of paths and methods comes from the app's router, so the document cannot drift
from what is served: :data:`OPERATIONS` only adds the words (summary, parameters, bodies,
responses) for each known route, and a route it does not know (an ``extra_routes`` one) is
still listed, with a generic description (a REST extension's route with the summary it gave).
Unit tests check both directions.
"""

from __future__ import annotations

import importlib.metadata
import re
from typing import Any

from aiohttp import web

from mirrorline.rest.common import HERDER
from mirrorline.rest.routes_connectors import MAX_NAME_LENGTH, NAME_PATTERN, NAME_RULE

_PARAM_PATTERN = re.compile(r"\{(\w+)(?::[^{}]*)?\}")

EXTENSION_OPERATIONS: web.AppKey[dict[tuple[str, str], str]] = web.AppKey("extension_operations", dict)
"""``(METHOD, path) -> summary`` of the routes REST extensions added (:mod:`mirrorline.rest.extensions`)."""


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _ok(status: int, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description}
    if schema is not None:
        response.update(_json(schema))
    return {str(status): response}


def _errors(*statuses: int) -> dict[str, Any]:
    words = {400: "Bad request", 404: "Not found", 409: "Conflict (exists, or rebalance in progress)",
             413: "Request body larger than rest.request.max.bytes", 500: "Internal error", 503: "Starting"}
    return {str(s): {"description": words[s], **_json(_ref("Error"))} for s in statuses}


def _op(summary: str, responses: dict[str, Any], *, body: dict[str, Any] | None = None,
        query: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, **_json(body)}
        op["responses"] = {**responses, **_errors(400, 413)}  # every body may be malformed or too large
    if query:
        op["parameters"] = query
        if any(q.get("schema", {}).get("type") == "boolean" for q in query):
            op["responses"] = {**op["responses"], **_errors(400)}  # a flag that is neither true nor false
    return op


def _bool_query(name: str, default: bool, description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": {"type": "boolean", "default": default}}


_STR_MAP = {"type": "object", "additionalProperties": {"type": "string", "nullable": True}}
_ANY_MAP = {"type": "object", "additionalProperties": True}
# what request bodies may carry as a config value: numbers and booleans are read as their JSON text
_CONFIG_VALUE = {"nullable": True, "anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]}
_CONFIG_INPUT = {"type": "object", "additionalProperties": _CONFIG_VALUE}

CONNECTOR_NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH, "pattern": NAME_PATTERN,
                  "description": "Enforced when a connector is created: " + NAME_RULE}
"""The name rule of :func:`mirrorline.rest.routes_connectors.check_new_name` as a JSON schema."""

SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": {"type": "object", "required": ["error_code", "message"],
              "properties": {"error_code": {"type": "integer"}, "message": {"type": "string"}}},
    "ServerInfo": {"type": "object", "properties": {k: {"type": "string"}
                                                    for k in ("version", "commit", "kafka_cluster_id")}},
    "Health": {"type": "object", "properties": {"status": {"type": "string",
                                                           "enum": ["healthy", "starting", "unhealthy"]},
                                                "message": {"type": "string"}}},
    "ConfigMap": _STR_MAP,
    "ConnectorConfig": {**_CONFIG_INPUT, "required": ["connector.class"],
                        "properties": {"connector.class": {"type": "string", "minLength": 1}}},
    "ConfigPatch": _CONFIG_INPUT,
    "CreateConnectorRequest": {
        "type": "object", "required": ["name", "config"],
        "properties": {"name": CONNECTOR_NAME, "config": _ref("ConnectorConfig"),
                       "initial_state": {"type": "string", "nullable": True,
                                         "enum": ["RUNNING", "PAUSED", "STOPPED"]}}},
    "ConnectorTaskId": {"type": "object", "properties": {"connector": {"type": "string"},
                                                         "task": {"type": "integer"}}},
    "ConnectorInfo": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "config": _ref("ConfigMap"),
                       "tasks": {"type": "array", "items": _ref("ConnectorTaskId")},
                       "type": {"type": "string", "enum": ["source", "sink", "unknown"]}}},
    "State": {"type": "object", "properties": {"state": {"type": "string"}, "worker_id": {"type": "string"},
                                               "trace": {"type": "string"}}},
    "TaskState": {"type": "object", "properties": {"id": {"type": "integer"}, "state": {"type": "string"},
                                                   "worker_id": {"type": "string"}, "trace": {"type": "string"}}},
    "ConnectorStateInfo": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "connector": _ref("State"),
                       "tasks": {"type": "array", "items": _ref("TaskState")}, "type": {"type": "string"}}},
    "TaskInfo": {"type": "object", "properties": {"id": _ref("ConnectorTaskId"), "config": _ref("ConfigMap")}},
    "ConnectorOffset": {"type": "object", "required": ["partition", "offset"],
                        "properties": {"partition": {**_ANY_MAP, "minProperties": 1},
                                       "offset": {**_ANY_MAP, "nullable": True}}},
    "ConnectorOffsets": {"type": "object", "required": ["offsets"],
                         "properties": {"offsets": {"type": "array", "minItems": 1,
                                                    "items": _ref("ConnectorOffset")}}},
    "Message": {"type": "object", "properties": {"message": {"type": "string"}}},
    "ActiveTopics": {"type": "object", "additionalProperties": {
        "type": "object", "properties": {"topics": {"type": "array", "items": {"type": "string"}}}}},
    "PluginInfo": {"type": "object", "properties": {"class": {"type": "string"}, "type": {"type": "string"},
                                                    "version": {"type": "string"}}},
    "ConfigKeyInfo": {"type": "object", "properties": {
        **{k: {"type": "string"} for k in ("name", "type", "importance", "documentation", "group", "width",
                                          "display_name")},
        "required": {"type": "boolean"}, "default_value": {"type": "string", "nullable": True},
        "order": {"type": "integer"}, "dependents": {"type": "array", "items": {"type": "string"}}}},
    "ConfigInfos": {"type": "object", "properties": {
        "name": {"type": "string"}, "error_count": {"type": "integer"},
        "groups": {"type": "array", "items": {"type": "string"}},
        "configs": {"type": "array", "items": {"type": "object", "properties": {
            "definition": _ref("ConfigKeyInfo"), "value": _ANY_MAP}}}}},
    "LoggerLevel": {"type": "object", "properties": {"level": {"type": "string"},
                                                     "last_modified": {"type": "integer", "nullable": True}}},
    "LoggerLevelRequest": {"type": "object", "required": ["level"], "properties": {"level": {"type": "string"}}},
    "CreateJobRequest": {
        "type": "object", "required": ["name", "config"],
        "properties": {"name": CONNECTOR_NAME, "connector": {"type": "string", "nullable": True},
                       "config": {**_CONFIG_INPUT, "required": ["job.class"],
                                  "properties": {"job.class": {"type": "string", "minLength": 1},
                                                 "connector": {"type": "string"}}}}},
    "JobInfo": {"type": "object", "properties": {
        "name": {"type": "string"}, "job.class": {"type": "string"}, "connector": {"type": "string", "nullable": True},
        "config": _ref("ConfigMap"),
        "state": {"type": "string", "enum": ["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]},
        "cancel_requested": {"type": "boolean"}, "worker_id": {"type": "string", "nullable": True},
        "attempt": {"type": "integer"}, "progress": {**_ANY_MAP, "nullable": True},
        "records_per_second": {"type": "number", "nullable": True},
        "eta_seconds": {"type": "number", "nullable": True}, "spark_ui": {"type": "string", "nullable": True},
        "result": {"nullable": True}, "trace": {"type": "string"}, "waiting": {"type": "string", "nullable": True},
        "partitions": {"type": "array", "items": {"type": "string"}}, "holds_partitions": {"type": "boolean"}}},
    "JobPluginInfo": {"type": "object", "properties": {
        "class": {"type": "string"}, "name": {"type": "string"}, "type": {"type": "string"},
        "version": {"type": "string", "nullable": True}, "description": {"type": "string"},
        "connector_classes": {"type": "array", "items": {"type": "string"}}}},
}
"""Connect's entity shapes (``docs/rest-api.md``)."""

_C = "/connectors/{connector}"
_T = _C + "/tasks/{task}"

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/"): _op("Server info", _ok(200, "ServerInfo", _ref("ServerInfo"))),
    ("GET", "/health"): _op("Worker health (KIP-1017)", {**_ok(200, "Healthy", _ref("Health")),
                                                        **_ok(503, "Starting", _ref("Health")),
                                                        **_ok(500, "Unhealthy", _ref("Health"))}),
    ("GET", "/openapi.json"): _op("This document", _ok(200, "OpenAPI 3 document", {"type": "object"})),
    ("GET", "/metrics"): _op("Metrics in Prometheus text format (MM2's metric names where MM2 has them)",
                             {"200": {"description": "Prometheus exposition format"}}),
    ("GET", "/ui"): _op("Status page: flows, connectors, tasks, throughput, lag, checkpoint age and RPO",
                        {"200": {"description": "A self-contained HTML page"}}),
    ("GET", "/connectors"): _op(
        "List connectors", _ok(200, "Names, or {name: {status, info}} when expanded",
                               {"oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "object"}]}),
        query=[{"name": "expand", "in": "query", "required": False, "style": "form", "explode": True,
                "description": "status and/or info; other values are ignored, as in Connect",
                "schema": {"type": "array", "items": {"type": "string"}}}]),
    ("POST", "/connectors"): _op("Create a connector",
                                 {**_ok(201, "Created (Location header)", _ref("ConnectorInfo")), **_errors(400, 409)},
                                 body=_ref("CreateConnectorRequest")),
    ("GET", _C): _op("Connector info", {**_ok(200, "ConnectorInfo", _ref("ConnectorInfo")), **_errors(404)}),
    ("DELETE", _C): _op("Delete a connector", {**_ok(204, "Deleted"), **_errors(404)}),
    ("GET", _C + "/config"): _op("Connector config", {**_ok(200, "Config map", _ref("ConfigMap")), **_errors(404)}),
    ("PUT", _C + "/config"): _op("Create or replace a connector's config",
                                 {**_ok(200, "Replaced", _ref("ConnectorInfo")),
                                  **_ok(201, "Created (Location header)", _ref("ConnectorInfo")), **_errors(400)},
                                 body=_ref("ConnectorConfig")),
    ("PATCH", _C + "/config"): _op("Patch a connector's config (null removes a key)",
                                   {**_ok(200, "Patched", _ref("ConnectorInfo")), **_errors(400, 404)},
                                   body=_ref("ConfigPatch")),
    ("GET", _C + "/status"): _op("Connector and task states",
                                 {**_ok(200, "ConnectorStateInfo", _ref("ConnectorStateInfo")), **_errors(404)}),
    ("POST", _C + "/restart"): _op(
        "Restart a connector (and tasks)",
        {**_ok(202, "Restarting", _ref("ConnectorStateInfo")), **_ok(204, "Connector restarted"), **_errors(404)},
        query=[_bool_query("includeTasks", False, "Restart the tasks too"),
               _bool_query("onlyFailed", False, "Only restart failed instances")]),
    ("PUT", _C + "/pause"): _op("Pause", {**_ok(202, "Pausing"), **_errors(404)}),
    ("PUT", _C + "/resume"): _op("Resume a paused or stopped connector", {**_ok(202, "Resuming"), **_errors(404)}),
    ("PUT", _C + "/stop"): _op("Stop (tasks shut down, config kept)", {**_ok(204, "Stopped"), **_errors(404)}),
    ("PUT", _C + "/fence"): _op("Internal (KIP-618): fence the previous generation of a source connector's tasks",
                                {**_ok(204, "Fenced"), **_errors(400, 404, 409)}),
    ("GET", _C + "/tasks"): _op("Task configs", {**_ok(200, "TaskInfo list", {"type": "array",
                                                                               "items": _ref("TaskInfo")}),
                                                 **_errors(404)}),
    ("GET", _T + "/status"): _op("Task state", {**_ok(200, "Task state", _ref("TaskState")), **_errors(404)}),
    ("POST", _T + "/restart"): _op("Restart a task", {**_ok(204, "Restarted"), **_errors(404)}),
    ("GET", _C + "/topics"): _op("Active topics", {**_ok(200, "Active topics", _ref("ActiveTopics")),
                                                   **_errors(404)}),
    ("PUT", _C + "/topics/reset"): _op("Forget active topics", {**_ok(202, "Reset"), **_errors(404)}),
    ("GET", _C + "/offsets"): _op("Committed offsets (KIP-875)",
                                  {**_ok(200, "ConnectorOffsets", _ref("ConnectorOffsets")), **_errors(404)}),
    ("PATCH", _C + "/offsets"): _op("Alter offsets of a stopped connector",
                                    {**_ok(200, "Altered", _ref("Message")), **_errors(400, 404)},
                                    body=_ref("ConnectorOffsets")),
    ("DELETE", _C + "/offsets"): _op("Reset offsets of a stopped connector",
                                     {**_ok(200, "Reset", _ref("Message")), **_errors(400, 404)}),
    ("GET", "/connector-plugins"): _op(
        "Installed plugins", _ok(200, "PluginInfo list", {"type": "array", "items": _ref("PluginInfo")}),
        query=[_bool_query("connectorsOnly", True, "List connectors only")]),
    ("GET", "/connector-plugins/{plugin}/config"): _op(
        "A plugin's config definitions",
        {**_ok(200, "ConfigKeyInfo list", {"type": "array", "items": _ref("ConfigKeyInfo")}), **_errors(404)}),
    ("PUT", "/connector-plugins/{plugin}/config/validate"): _op(
        "Validate a config", {**_ok(200, "ConfigInfos (errors in the body)", _ref("ConfigInfos")),
                              **_errors(400, 404)},
        body=_ref("ConfigPatch")),
    ("GET", "/job-plugins"): _op("Installed job classes (beyond Connect)",
                                 _ok(200, "Job classes", {"type": "array", "items": _ref("JobPluginInfo")})),
    ("GET", "/jobs"): _op(
        "List jobs (beyond Connect)", _ok(200, "Names, or {name: {status}} with ?expand=status",
                                          {"oneOf": [{"type": "array", "items": {"type": "string"}},
                                                     {"type": "object"}]}),
        query=[{"name": "expand", "in": "query", "required": False, "schema": {"type": "string", "enum": ["status"]}}]),
    ("POST", "/jobs"): _op("Submit a bulk job (backfill, reconcile) to the worker cluster",
                           {**_ok(201, "Accepted (Location header)", _ref("JobInfo")), **_errors(400, 409)},
                           body=_ref("CreateJobRequest")),
    ("GET", "/jobs/{job}"): _op("A job's state, progress, Spark UI and result",
                                {**_ok(200, "JobInfo", _ref("JobInfo")), **_errors(404)}),
    ("DELETE", "/jobs/{job}"): _op("Cancel a job that has not finished (202), or remove a finished one (200)",
                                   {**_ok(200, "Removed: its info and result", _ref("JobInfo")),
                                    **_ok(202, "Cancel requested", _ref("JobInfo")), **_errors(404)}),
    ("GET", "/admin/loggers"): _op("Loggers with a level set, plus root",
                                   _ok(200, "{logger: LoggerLevel}",
                                       {"type": "object", "additionalProperties": _ref("LoggerLevel")})),
    ("GET", "/admin/loggers/{logger}"): _op("A logger's level",
                                            {**_ok(200, "LoggerLevel", _ref("LoggerLevel")), **_errors(404)}),
    ("PUT", "/admin/loggers/{logger}"): _op(
        "Set the level of a logger namespace",
        {**_ok(200, "Affected loggers", {"type": "array", "items": {"type": "string"}}), **_errors(400, 404)},
        body=_ref("LoggerLevelRequest"),
        query=[{"name": "scope", "in": "query", "required": False,
                "schema": {"type": "string", "enum": ["worker"], "default": "worker"}}]),
}
"""Hand-written words for each built-in route, keyed by ``(METHOD, path)`` in OpenAPI form."""


def openapi_path(canonical: str) -> str:
    """An aiohttp route path in OpenAPI form (``{task:\\d+}`` → ``{task}``)."""
    return _PARAM_PATTERN.sub(r"{\1}", canonical)


def registered_operations(app: web.Application) -> list[tuple[str, str]]:
    """``(METHOD, path)`` of every route of ``app``, HEAD and wildcard methods left out."""
    seen: dict[tuple[str, str], None] = {}
    for route in app.router.routes():
        if route.method in ("HEAD", "*"):
            continue
        seen[(route.method, openapi_path(route.resource.canonical))] = None
    return list(seen)


def _path_parameters(path: str) -> list[dict[str, Any]]:
    schemas = {"task": {"type": "integer", "minimum": 0}, "connector": CONNECTOR_NAME}
    return [{"name": name, "in": "path", "required": True, "schema": schemas.get(name, {"type": "string"})}
            for name in _PARAM_PATTERN.findall(path)]


def _version() -> str:
    try:
        return importlib.metadata.version("mirrorline")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _extension_op(app: web.Application, method: str, path: str) -> dict[str, Any] | None:
    """The words of a route a REST extension added (its summary; JSON body and errors), else None."""
    summaries = app.get(EXTENSION_OPERATIONS) or {}
    summary = summaries.get((method, path))
    if summary is None:
        return None
    responses = {"200": {"description": "Response", **_json({})}, **_errors(400, 404, 500)}
    return _op(summary, responses, body={} if method in ("POST", "PUT", "PATCH") else None)


def build_openapi(app: web.Application) -> dict[str, Any]:
    """The OpenAPI 3.0 document of ``app``: one operation per registered route."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path in registered_operations(app):
        op = dict(OPERATIONS.get((method, path)) or _extension_op(app, method, path)
                  or _op(f"{method} {path}", {"default": {"description": "Response"}}))
        params = _path_parameters(path) + op.get("parameters", [])
        if params:
            op["parameters"] = params
        paths.setdefault(path, {})[method.lower()] = op
    return {
        "openapi": "3.0.3",
        "info": {"title": "mirrorline REST API (Kafka Connect compatible)", "version": _version()},
        "paths": paths,
        "components": {"schemas": _with_installed_connectors(app, SCHEMAS)},
    }


def _with_installed_connectors(app: web.Application, schemas: dict[str, Any]) -> dict[str, Any]:
    """``schemas`` with ``connector.class`` limited to the names the worker's plugins answer to:
    the server refuses any other, so the document says so."""
    plugins = getattr(app.get(HERDER), "plugins", None)
    if plugins is None or not hasattr(plugins, "connector_names"):
        return schemas
    connector_class = {"type": "string", "enum": plugins.connector_names()}
    config = schemas["ConnectorConfig"]
    return {**schemas, "ConnectorConfig": {**config, "properties": {**config.get("properties", {}),
                                                                     "connector.class": connector_class}}}
