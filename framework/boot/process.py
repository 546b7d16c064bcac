"""Running a worker process: stores, herder, REST server, signal handling, orderly shutdown.

Shared by ``mirrorline standalone`` (and later the distributed and MM2 modes): it wires
the pieces together and owns their lifetimes. SIGTERM and SIGINT stop the worker
gracefully — tasks flush in-flight records and store their offsets before exit.

:func:`rest_security` turns the worker's REST settings into the server's authentication and TLS
(``https://`` listeners, Basic auth, client certificates) before anything else starts, so a
bad key store or credentials file is a one-line start-up error.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from dataclasses import dataclass
from urllib.parse import urlparse


from mirrorline.api.config import Config
from mirrorline.api.errors import ConfigError, ConnectError
from mirrorline.clients.admin import KafkaAdmin
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.herder import Herder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Listener:
    """Where the REST API listens: host ('' for every interface), port (0 for any free one) and scheme."""

    host: str
    port: int
    scheme: str = "http"


def parse_listener(listeners: list[str]) -> Listener:
    """The first ``http://host:port`` or ``https://host:port`` of Connect's ``listeners`` setting."""
    if not listeners:
        raise ConfigError("listeners must name at least one http://host:port or https://host:port")
    url = urlparse(listeners[0])
    if url.scheme not in ("http", "https") or url.port is None:
        raise ConfigError(f"listeners: {listeners[0]!r} is not of the form http://host:port or https://host:port")
    return Listener(url.hostname or "", url.port, url.scheme)


def rest_security(worker_config: Any, listener: Listener, *, session_keys: Callable[[], list[bytes]] | None = None,
                  environ: Mapping[str, str] | None = None) -> tuple[Any, ssl.SSLContext | None]:
    """``(RestAuth, server SSLContext or None)`` for the REST API, from the worker's settings.

    Raises ConfigError for an unknown ``rest.extension.classes`` entry, an unreadable
    credentials/JAAS file or key store. Logs a WARNING when the API would listen beyond
    loopback without any authentication.
    """
    from mirrorline.rest.auth import rest_auth_from_config, warn_if_open
    from mirrorline.rest.tls import RestSslSettings, server_ssl_context

    auth = rest_auth_from_config(worker_config, session_keys=session_keys, environ=environ)
    context = None
    client_certificates = False
    if listener.scheme == "https":
        settings = RestSslSettings.from_config(worker_config)
        context = server_ssl_context(settings)
        client_certificates = settings.requires_client_certificate
    warn_if_open(listener.host, auth, client_certificates)
    return auth, context


def forwarding_ssl_context(worker_config: Any, listener: Listener) -> ssl.SSLContext | None:
    """The client SSLContext for requests to other workers (None when the cluster speaks plain http)."""
    if listener.scheme != "https":
        return None
    from mirrorline.rest.tls import RestSslSettings, client_ssl_context

    return client_ssl_context(RestSslSettings.from_config(worker_config))


def _listen_error(listener: Listener, exc: OSError) -> ConnectError:
    where = f"{listener.host or '0.0.0.0'}:{listener.port}"
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EADDRINUSE:
        hint = "stop the process that uses it, or set listeners to a free port (port 0 picks one)"
    elif exc.errno == errno.EACCES:
        hint = "ports below 1024 need privileges: set listeners to a higher port"
    else:
        hint = "check the host and port in listeners"
    return ConnectError(f"cannot serve the REST API on {where} (listeners): {reason}; {hint}")


def check_listener_free(listener: Listener) -> None:
    """Fail fast, with a one-line ConnectError, if the REST port cannot be bound.

    Run before any Kafka client or herder exists, so a taken port leaves nothing to clean up.
    Binds the way the server will (address reuse on, every address the host resolves to) and
    lets go at once; port 0 always succeeds. The server's own bind still reports a port taken
    in between.
    """
    if listener.port == 0:
        return
    try:
        addresses = socket.getaddrinfo(listener.host or "0.0.0.0", listener.port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConnectError(f"cannot serve the REST API on {listener.host}:{listener.port} (listeners): "
                           f"unknown host ({exc.strerror})") from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise _listen_error(listener, exc) from None


async def kafka_cluster_id(worker_config: Config, timeout_s: float = 30.0) -> str:
    """Ask the worker's Kafka cluster for its id, failing with a clear message if it cannot be reached."""
    bootstrap = ",".join(worker_config["bootstrap.servers"])
    admin = KafkaAdmin.from_settings({"bootstrap.servers": bootstrap, **worker_config.with_prefix("admin."),
                                      "request.timeout.ms": int(timeout_s * 1000)})
    try:
        async with asyncio.timeout(timeout_s):
            await admin.start()
        async with asyncio.timeout(timeout_s):
            description = await admin.describe_cluster()
        return description.cluster_id
    except (asyncio.TimeoutError, OSError, Exception) as exc:
        detail = str(exc) or "timed out"
        if not detail.startswith(exc.__class__.__name__):  # some client errors name their class already
            detail = f"{exc.__class__.__name__}: {detail}"
        raise ConnectError(f"cannot reach Kafka at bootstrap.servers={bootstrap}: {detail}. Check that the "
                           f"brokers run and the address is right.") from None
    finally:
        await admin.close()


class StopSignals:
    """Sets an event on SIGTERM/SIGINT while active (``with StopSignals(event): ...``)."""

    def __init__(self, stop_event: asyncio.Event):
        self.stop_event = stop_event
        self._loop = asyncio.get_running_loop()

    def __enter__(self) -> asyncio.Event:
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self._loop.add_signal_handler(sig, self.stop_event.set)
            except (NotImplementedError, RuntimeError):  # not the main thread: the caller stops us
                pass
        return self.stop_event

    def __exit__(self, *exc) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self._loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass


async def serve(herder: Herder, listener: Listener, *, on_started: Callable[[str], Awaitable[None]] | None = None,
                stop_event: asyncio.Event | None = None, auth: Any = None,
                ssl_context: ssl.SSLContext | None = None, forwarder: Any = None) -> None:
    """Serve the herder's REST API until SIGTERM/SIGINT (or ``stop_event``), then stop everything.

    If the port cannot be bound this raises a one-line ConnectError and leaves the herder to the
    caller (a distributed herder is not started yet, and stopping one that never started would
    wait for its event loop). Callers check the port first with :func:`check_listener_free`, so
    this only happens when another process takes the port in between. ``auth`` (a
    :class:`~mirrorline.rest.auth.RestAuth`) and ``ssl_context`` come from :func:`rest_security`;
    ``forwarder`` (a :class:`~mirrorline.rest.forwarding.WorkerClient`) forwards what a distributed
    herder says another worker must carry out.
    """
    from mirrorline.rest.app import RestServer

    server = RestServer(herder, auth=auth, ssl_context=ssl_context, forwarder=forwarder)
    with StopSignals(stop_event or asyncio.Event()) as stop:
        try:
            await server.start(listener.host or "0.0.0.0", listener.port)
        except OSError as exc:
            raise _listen_error(listener, exc) from None
        log.info("REST API listening on %s", server.url)
        try:
            if on_started is not None:
                await on_started(server.url)
            await stop.wait()
            log.info("Shutting down: stopping tasks and storing their offsets")
        finally:
            await server.stop()
            await herder.stop()


def worker_id_for(listener: Listener, advertised_host: str | None, port: int) -> str:
    """Connect's worker id: the advertised host and REST port."""
    host = advertised_host or listener.host or socket.gethostname()
    return f"{host}:{port}"


def load_plugins() -> PluginRegistry:
    """Discover plugins, logging a summary of what loaded and what did not."""
    registry = PluginRegistry.discover()
    log.info("Loaded %d connector plugin(s): %s", len(registry.connectors()), ", ".join(registry.connectors()))
    return registry
