"""Mounting plugins' REST extensions (:mod:`mirrorline.api.rest_extension`) on the REST app.

:func:`mount_extensions` instantiates each extension class, calls its ``register`` with a
context whose ``add_route`` adds an aiohttp route to the app, and closes the extensions when
the app is cleaned up. Each route is wrapped by :func:`_aiohttp_handler`, which turns the
aiohttp request into a framework-independent :class:`~mirrorline.api.rest_extension.RestRequest`
and the handler's ``(status, body)`` into a JSON response. The app's middlewares (errors,
authentication) wrap extension routes as they wrap the built-in ones.

:class:`HerderClusterState` is the extensions' read-only view of the cluster, answered by the
herder: configs and task configs as stored (from its config store when it has one), statuses
as the API shows them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Iterable
from typing import Any

from aiohttp import web

from mirrorline.api.errors import BadRequestError, ConnectError, NotFoundError
from mirrorline.api.rest_extension import (
    ROUTE_METHODS,
    ClusterState,
    RestExtension,
    RestExtensionContext,
    RestHandler,
    RestRequest,
)
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.rest.common import json_response, read_json
from mirrorline.rest.openapi import EXTENSION_OPERATIONS, registered_operations
from mirrorline.runtime.config_providers import has_references
from mirrorline.runtime.herder import Herder

log = logging.getLogger(__name__)

_PATH = re.compile(r"/(?:[^{}\s]*|\{\w+\})*")


class HerderClusterState(ClusterState):
    """:class:`ClusterState` answered by a herder (any worker of the cluster)."""

    def __init__(self, herder: Herder, worker_id: str | None) -> None:
        """``worker_id`` overrides the herder's own id (None: ask the herder)."""
        self._herder = herder
        self._worker_id = worker_id

    @property
    def worker_id(self) -> str | None:
        """The id given to the app, else the herder's."""
        return self._worker_id or getattr(self._herder, "worker_id", None)

    async def connectors(self) -> list[str]:
        """Every connector of the cluster, sorted (the herder's list)."""
        return list(await self._herder.connectors())

    def _stored(self, name: str) -> dict[str, str] | None:
        """The stored config of ``name`` from the herder's config store (None when it has no store)."""
        store = getattr(self._herder, "config_store", None)
        if store is None:
            return None
        config = store.connectors().get(name)
        if config is None:
            raise NotFoundError(f"Connector {name} not found")
        return dict(config)

    async def connector_config(self, name: str) -> dict[str, str]:
        """As stored, from the config store (through the herder, secrets hidden, when there is none)."""
        stored = self._stored(name)
        return stored if stored is not None else dict(await self._herder.connector_config(name))

    async def resolved_connector_config(self, name: str) -> dict[str, str]:
        """As stored, then resolved with the worker's config providers (off the event loop)."""
        config = await self.connector_config(name)
        resolver = getattr(getattr(self._herder, "worker", None), "resolver", None)
        if resolver is None or not resolver.providers or not has_references(config):
            return config
        return dict((await asyncio.to_thread(resolver.resolve, config)).values)

    async def task_configs(self, name: str) -> list[dict[str, str]]:
        """As stored, from the config store (through the herder when there is none)."""
        if self._stored(name) is not None:
            return [dict(config) for config in self._herder.config_store.task_configs(name)]
        return [dict(task["config"]) for task in await self._herder.task_configs(name)]

    async def connector_status(self, name: str) -> dict[str, Any]:
        """The herder's ConnectorStateInfo."""
        return await self._herder.connector_status(name)


class _Context(RestExtensionContext):
    """The context one extension registers through: routes go straight into the app."""

    def __init__(self, app: web.Application, cluster_state: ClusterState, extension: str) -> None:
        self._app = app
        self._cluster_state = cluster_state
        self._extension = extension
        self.clients = KAFKA_CLIENTS

    @property
    def cluster_state(self) -> ClusterState:
        return self._cluster_state

    def add_route(self, method: str, path: str, handler: RestHandler, *, summary: str | None = None) -> None:
        method = str(method).upper()
        if method not in ROUTE_METHODS:
            raise ValueError(f"{self._extension}: method {method!r} is not one of {', '.join(ROUTE_METHODS)}")
        if not isinstance(path, str) or not _PATH.fullmatch(path):
            raise ValueError(f"{self._extension}: path {path!r} must start with / and use only {{name}} placeholders")
        if (method, path) in registered_operations(self._app):
            log.error("REST extension %s: %s %s is already served; the extension's route is left out",
                      self._extension, method, path)
            return
        self._app.router.add_route(method, path, _aiohttp_handler(handler, self._extension))
        self._app[EXTENSION_OPERATIONS][(method, path)] = summary or f"{method} {path} ({self._extension})"


async def _rest_request(request: web.Request) -> RestRequest:
    """The framework-independent view of ``request``; body-size limits apply (413) as everywhere."""
    body: Any = None
    body_error: BadRequestError | None = None
    try:
        body = await read_json(request)
    except BadRequestError as exc:
        body_error = exc
    query_all = {key: tuple(request.query.getall(key)) for key in request.query.keys()}
    return RestRequest(method=request.method, path=request.path, path_params=dict(request.match_info),
                       query={key: values[0] for key, values in query_all.items()}, query_all=query_all,
                       body=body, body_error=body_error)


def _aiohttp_handler(handler: RestHandler, extension: str):
    """An aiohttp handler running an extension's ``handler``."""
    async def handle(request: web.Request) -> web.StreamResponse:
        result = await handler(await _rest_request(request))
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], int)
                and 200 <= result[0] < 600):
            raise ConnectError(f"REST extension {extension} answered {result!r}, not (status, body)")
        status, body = result
        if body is None:
            return web.Response(status=status)
        return json_response(body, status=status)

    return handle


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def mount_extensions(app: web.Application, herder: Herder, classes: Iterable[type[RestExtension]],
                     worker_id: str | None = None) -> list[RestExtension]:
    """Instantiate and register each extension class on ``app``; returns those that registered.

    An extension whose constructor or ``register`` raises is logged and left out (routes it added
    before failing stay). The extensions are closed when the app is cleaned up.
    """
    app.setdefault(EXTENSION_OPERATIONS, {})
    cluster_state = HerderClusterState(herder, worker_id)
    mounted: list[RestExtension] = []
    for cls in classes:
        name = _name(cls)
        try:
            extension = cls()
            extension.register(_Context(app, cluster_state, name))
        except Exception:  # noqa: BLE001 - a broken plugin must not take the API down
            log.exception("REST extension %s could not be registered and is left out", name)
            continue
        mounted.append(extension)

    async def close_all(_app: web.Application) -> None:
        for extension in mounted:
            try:
                await extension.close()
            except Exception:  # noqa: BLE001 - closing the others matters more
                log.exception("REST extension %s failed to close", _name(type(extension)))

    if mounted:
        app.on_cleanup.append(close_all)
    return mounted


def installed_extensions(herder: Herder) -> list[type[RestExtension]]:
    """The extension classes of the herder's plugin registry (none when it has no registry).

    The registry is looked up statically (the herder's own attribute, no ``__getattr__``): the
    REST app is built before the herder may be used, and must not call into it.
    """
    plugins = inspect.getattr_static(herder, "plugins", None)
    if isinstance(plugins, property):
        plugins = getattr(herder, "plugins", None)
    rest_extensions = getattr(plugins, "rest_extensions", None)
    return list(rest_extensions()) if callable(rest_extensions) else []
