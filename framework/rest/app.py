"""The REST application, its error middleware, and :class:`RestServer` which serves it.

Every error leaves as Kafka Connect's ``{"error_code": <status>, "message": "..."}``: a
:class:`~mirrorline.api.errors.ConnectError` with its ``http_status`` (herder errors and the
400s of request parsing), aiohttp's own 404/405/413 with Connect's wording, and any other
exception as 500 with its message (logged with the traceback). No HTML error pages.

Authentication (:mod:`mirrorline.rest.auth`) runs as a second middleware inside the error one, so
its 401s look like every other error; TLS (:mod:`mirrorline.rest.tls`) is the ``ssl_context`` of
:class:`RestServer`. In a cluster, a third middleware (:mod:`mirrorline.rest.forwarding`) forwards a
request the herder says another worker must carry out. Plugins' REST extensions (:mod:`mirrorline.rest.extensions`) are mounted on
the same app, so their routes get both middlewares.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web

from mirrorline.api.errors import ConnectError
from mirrorline.api.rest_extension import RestExtension
from mirrorline.rest import routes_admin, routes_connectors, routes_jobs, routes_plugins, routes_ui, routes_worker
from mirrorline.rest.auth import RestAuth
from mirrorline.rest.common import HERDER, LOGGERS, WORKER_ID, error_response
from mirrorline.rest.extensions import installed_extensions, mount_extensions
from mirrorline.rest.forwarding import WorkerClient, forwarding_middleware
from mirrorline.rest.loggers import Loggers
from mirrorline.runtime.herder import Herder

log = logging.getLogger(__name__)

MAX_REQUEST_BODY = 16 * 1024 * 1024
"""Largest request body accepted (bytes); a larger one is a 413."""

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _http_exception_message(exc: web.HTTPException) -> str:
    default = f"{exc.status}: {exc.reason}"
    if exc.text and exc.text != default:
        return exc.text
    return f"HTTP {exc.status} {exc.reason}"  # Jersey's wording, e.g. "HTTP 404 Not Found"


@web.middleware
async def error_middleware(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """Turn every error into a Connect JSON error body (see the module docstring)."""
    try:
        return await handler(request)
    except ConnectError as exc:
        status = exc.http_status
        if status >= 500:
            log.error("Error handling %s %s: %s", request.method, request.path, exc, exc_info=exc)
        return error_response(status, str(exc) or type(exc).__name__)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() not in ("content-type", "content-length")}
        return error_response(exc.status, _http_exception_message(exc), headers=headers)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - the last resort: a 500 with the message, traceback logged
        log.exception("Unexpected error handling %s %s", request.method, request.path)
        return error_response(500, str(exc) or type(exc).__name__)


def create_app(herder: Herder, *, worker_id: str | None = None,
               extra_routes: Iterable[web.AbstractRouteDef] | None = None,
               auth: RestAuth | None = None,
               rest_extensions: Iterable[type[RestExtension]] | None = None,
               forwarder: WorkerClient | None = None) -> web.Application:
    """The Connect-compatible REST app over ``herder``.

    ``extra_routes`` (e.g. ``[web.get("/metrics", handler)]`` or a ``RouteTableDef``) are
    served alongside the Connect routes, get the same JSON errors, and appear in
    ``/openapi.json``. ``worker_id`` is kept in the app under
    :data:`mirrorline.rest.common.WORKER_ID` for such routes; the built-in routes do not need
    it (the herder puts worker ids in statuses). ``auth`` authenticates every route, the status
    page and ``/metrics`` included (None: no authentication). ``rest_extensions`` are the
    :class:`~mirrorline.api.rest_extension.RestExtension` classes to mount after the built-in
    routes (None: those the herder's plugin registry collected from ``register_rest_extensions``).
    ``forwarder`` sends requests the herder cannot carry out here to the worker that can (None: a
    herder that never asks, such as a standalone one; such a request is then a 409).
    """
    middlewares = [error_middleware] + ([auth.middleware()] if auth is not None and auth.enabled else [])
    if forwarder is not None:
        middlewares.append(forwarding_middleware(forwarder))
    app = web.Application(middlewares=middlewares, client_max_size=MAX_REQUEST_BODY)
    app[HERDER] = herder
    app[LOGGERS] = Loggers()
    app[WORKER_ID] = worker_id
    for module in (routes_worker, routes_connectors, routes_plugins, routes_jobs, routes_admin, routes_ui):
        app.add_routes(module.routes)
    if extra_routes is not None:
        app.add_routes(extra_routes)
    extensions = installed_extensions(herder) if rest_extensions is None else list(rest_extensions)
    mount_extensions(app, herder, extensions, worker_id)
    return app


class RestServer:
    """Serves :func:`create_app` over TCP (TLS with ``ssl_context``) with an aiohttp ``AppRunner`` and ``TCPSite``."""

    def __init__(self, herder: Herder, *, worker_id: str | None = None,
                 extra_routes: Iterable[web.AbstractRouteDef] | None = None,
                 shutdown_timeout: float = 5.0, auth: RestAuth | None = None,
                 ssl_context: ssl.SSLContext | None = None,
                 rest_extensions: Iterable[type[RestExtension]] | None = None,
                 forwarder: WorkerClient | None = None) -> None:
        """Build the app; nothing listens until :meth:`start`.

        ``shutdown_timeout`` is how long :meth:`stop` lets in-flight requests finish;
        ``ssl_context`` makes it an https server; ``rest_extensions`` and ``forwarder`` as in
        :func:`create_app` (the server owns the forwarder: :meth:`stop` closes it).
        """
        self.app = create_app(herder, worker_id=worker_id, extra_routes=extra_routes, auth=auth,
                              rest_extensions=rest_extensions, forwarder=forwarder)
        self._forwarder = forwarder
        self.worker_id = worker_id
        self.ssl_context = ssl_context
        self._shutdown_timeout = shutdown_timeout
        self._runner: web.AppRunner | None = None
        self._host: str | None = None
        self._port: int | None = None

    async def start(self, host: str, port: int) -> None:
        """Listen on ``host:port``; port 0 picks a free port (read it from :attr:`port`)."""
        if self._runner is not None:
            raise RuntimeError("RestServer is already started")
        runner = web.AppRunner(self.app, handle_signals=False, shutdown_timeout=self._shutdown_timeout)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port, ssl_context=self.ssl_context).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._host = host
        self._port = runner.addresses[0][1]
        log.debug("REST API%s listening on %s", f" of worker {self.worker_id}" if self.worker_id else "", self.url)

    @property
    def port(self) -> int:
        """The bound TCP port (the real one when started with port 0)."""
        if self._port is None:
            raise RuntimeError("RestServer is not started")
        return self._port

    @property
    def url(self) -> str:
        """Base URL to reach the server, e.g. ``http://127.0.0.1:8083`` or ``https://...`` (wildcard hosts → loopback)."""
        host = self._host or ""
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    async def stop(self) -> None:
        """Stop listening and close the app (idempotent)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        if self._forwarder is not None:
            await self._forwarder.close()
        self._port = None
