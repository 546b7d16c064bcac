"""REST extensions: plugins that add routes to every worker's REST API.

Modelled on Kafka Connect's ``ConnectRestExtension``. A plugin returns :class:`RestExtension`
subclasses from the ``register_rest_extensions`` hook; each worker's REST app makes one
instance of each and calls :meth:`RestExtension.register` once with a
:class:`RestExtensionContext`, through which the extension adds its routes and reads the
worker cluster's state (:class:`ClusterState`, Connect's ``ConnectClusterState``). When the
REST server stops, :meth:`RestExtension.close` is awaited.

This module is framework-independent on purpose: handlers see a :class:`RestRequest` (method,
path parameters, query, the JSON body) and return ``(status, body)``, where ``body`` is
anything :func:`json.dumps` takes (None: no body). They raise
:mod:`mirrorline.api.errors` types for errors (``BadRequestError`` is a 400,
``NotFoundError`` a 404 ...), which reach the client as Connect's
``{"error_code", "message"}``, like every other error of the API. Extension routes are
behind the same authentication as the rest of the API.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorline.api.clients import KafkaClients
from mirrorline.api.errors import BadRequestError

#: HTTP methods an extension route may use.
ROUTE_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class RestRequest:
    """One request to an extension route, as the handler sees it.

    ``path_params`` are the values of the route's ``{name}`` placeholders; ``query`` holds the
    first value of each query parameter and ``query_all`` every value. The body is read (within
    ``rest.request.max.bytes``) and parsed as JSON before the handler runs; :meth:`json` returns
    it, or raises the :class:`~mirrorline.api.errors.BadRequestError` saying why it is not JSON
    (empty, malformed, nested too deep), so a handler that needs no body never sees that error.
    """

    method: str
    path: str
    path_params: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    query_all: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    body: Any = None
    body_error: BadRequestError | None = None

    def json(self) -> Any:
        """The parsed JSON body; raises the BadRequestError (400) recorded when it is not JSON."""
        if self.body_error is not None:
            raise self.body_error
        return self.body


#: What an extension route runs: a coroutine function taking the request, returning ``(status, body)``.
RestHandler = Callable[[RestRequest], Awaitable[tuple[int, Any]]]


class ClusterState(ABC):
    """Read-only view of the worker cluster this worker belongs to (Connect's ``ConnectClusterState``).

    Answers for the whole cluster from any worker: in distributed mode every worker reads the
    config topic, so a route served by a worker that runs none of a connector's work still sees
    its config and task configs.
    """

    @property
    @abstractmethod
    def worker_id(self) -> str | None:
        """The id of the worker serving the request (``host:port``), None if it has none yet."""

    @abstractmethod
    async def connectors(self) -> list[str]:
        """Names of every connector of the cluster, sorted."""

    @abstractmethod
    async def connector_config(self, name: str) -> dict[str, str]:
        """The connector's config as stored: secrets are *not* hidden, placeholders are not resolved.

        Raises NotFoundError for an unknown connector. Never echo the values of secret settings
        (see :func:`mirrorline.api.secrets.is_secret`) in a response or a log line.
        """

    async def resolved_connector_config(self, name: str) -> dict[str, str]:
        """The connector's config with its config-provider references (``${provider:path:key}``) resolved
        by this worker's ``config.providers``, as the connector itself gets it.

        For an extension that must reach a system with the connector's own settings (its Kafka
        clusters, with their credentials). The values are secrets: never echo them. ConfigError
        when a reference cannot be resolved, NotFoundError for an unknown connector. Without
        providers or references it is :meth:`connector_config`.
        """
        return await self.connector_config(name)

    @abstractmethod
    async def task_configs(self, name: str) -> list[dict[str, str]]:
        """The connector's current task configs, by task number (as stored; empty when it has no tasks).

        These are the configs the cluster's tasks run with. NotFoundError for an unknown connector.
        """

    @abstractmethod
    async def connector_status(self, name: str) -> dict[str, Any]:
        """ConnectorStateInfo, as ``GET /connectors/{name}/status`` returns it; NotFoundError if unknown."""


class RestExtensionContext(ABC):
    """Handed to :meth:`RestExtension.register`: add routes, read the cluster's state."""

    #: Kafka clients for handlers that reach a cluster (see :class:`~mirrorline.api.clients.KafkaClients`).
    clients: KafkaClients

    @property
    @abstractmethod
    def cluster_state(self) -> ClusterState:
        """The worker cluster's state, read-only."""

    @abstractmethod
    def add_route(self, method: str, path: str, handler: RestHandler, *, summary: str | None = None) -> None:
        """Serve ``method path`` with ``handler``.

        ``method`` is one of :data:`ROUTE_METHODS`; ``path`` starts with ``/`` and may hold
        ``{name}`` placeholders, each matching one path segment (``/admin/things/{thing}``).
        ``summary`` is the one line ``/openapi.json`` shows for the route. A route whose method
        and path are already served (by the API or another extension) is refused: it is
        logged and left out, and the API keeps serving the existing one. ValueError for a
        method or path of the wrong form.
        """


class RestExtension(ABC):
    """A plugin's addition to the REST API; instantiated without arguments by each worker's REST app."""

    @abstractmethod
    def register(self, context: RestExtensionContext) -> None:
        """Add the extension's routes with ``context.add_route``; called once, before the server listens.

        Only declare routes here: no I/O. An exception is logged and the extension is left out
        (the rest of the API is served as usual).
        """

    async def close(self) -> None:
        """Release what the extension holds; awaited once when the REST server stops. Does nothing by default."""


def json_type(value: Any) -> str:
    """How a JSON value's type reads in an error message ("an object", "an array", ...): for handlers
    that check a request body."""
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
