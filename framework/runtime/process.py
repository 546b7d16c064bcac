"""Running a worker process: stores, herder, REST server, signal handling, orderly shutdown.

Shared by ``mirrorline standalone`` (and later the distributed and MM2 modes): it wires
the pieces together and owns their lifetimes. SIGTERM and SIGINT stop the worker
gracefully — tasks flush in-flight records and store their offsets before exit.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlparse

from aiokafka.admin import AIOKafkaAdminClient

from framework.api.config import Config
from framework.api.errors import ConfigError, ConnectError
from framework.api.kafka_clients import client_kwargs
from framework.plugins import PluginRegistry
from framework.runtime.herder import Herder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Listener:
    """Where the REST API listens: host ('' for every interface) and port (0 for any free one)."""

    host: str
    port: int


def parse_listener(listeners: list[str]) -> Listener:
    """The first ``http://host:port`` of Connect's ``listeners`` setting."""
    if not listeners:
        raise ConfigError("listeners must name at least one http://host:port")
    url = urlparse(listeners[0])
    if url.scheme != "http" or url.port is None:
        raise ConfigError(f"listeners: {listeners[0]!r} is not of the form http://host:port "
                          f"(https listeners are not supported yet)")
    return Listener(url.hostname or "", url.port)


async def kafka_cluster_id(worker_config: Config, timeout_s: float = 30.0) -> str:
    """Ask the worker's Kafka cluster for its id, failing with a clear message if it cannot be reached."""
    bootstrap = ",".join(worker_config["bootstrap.servers"])
    kwargs, _ = client_kwargs({"bootstrap.servers": bootstrap, **worker_config.with_prefix("admin.")}, "admin")
    admin = AIOKafkaAdminClient(**kwargs, request_timeout_ms=int(timeout_s * 1000))
    try:
        await asyncio.wait_for(admin.start(), timeout_s)
        return (await asyncio.wait_for(admin.describe_cluster(), timeout_s))["cluster_id"]
    except (asyncio.TimeoutError, OSError, Exception) as exc:
        raise ConnectError(f"cannot reach Kafka at bootstrap.servers={bootstrap}: "
                           f"{exc.__class__.__name__}: {exc or 'timed out'}. Check that the brokers run "
                           f"and the address is right.") from None
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
                stop_event: asyncio.Event | None = None) -> None:
    """Serve the herder's REST API until SIGTERM/SIGINT (or ``stop_event``), then stop everything."""
    from framework.rest.app import RestServer

    server = RestServer(herder)
    with StopSignals(stop_event or asyncio.Event()) as stop:
        await server.start(listener.host or "0.0.0.0", listener.port)
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
