"""``mirrorline standalone``: one worker, connectors from files and REST, offsets in a file."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from mirrorline.api.errors import ConnectError
from mirrorline.runtime.config_providers import resolve_worker_settings
from mirrorline.boot.process import (check_listener_free, kafka_cluster_id, load_plugins, parse_listener,
                                       rest_security, serve, worker_id_for)
from mirrorline.runtime.standalone import StandaloneHerder
from mirrorline.runtime.worker_config import WORKER_CONFIG_DEF
from mirrorline.storage import FileOffsetStore, MemoryConfigStore, MemoryOffsetStore, MemoryStatusStore

log = logging.getLogger(__name__)


async def run_standalone(worker_raw: dict[str, str], connector_configs: list[dict[str, str]], *,
                         stop_event: asyncio.Event | None = None,
                         on_started: Callable[[str], Awaitable[None]] | None = None) -> None:
    """Run a standalone worker until stopped; connector configs are created (or replaced) at start."""
    worker_raw = await asyncio.to_thread(resolve_worker_settings, worker_raw)
    worker_config = WORKER_CONFIG_DEF.parse(worker_raw)
    listener = parse_listener(worker_config["listeners"])
    check_listener_free(listener)
    auth, ssl_context = rest_security(worker_config, listener)
    cluster_id = await kafka_cluster_id(worker_config)
    offsets_file = worker_config["offset.storage.file.filename"]
    offset_store = FileOffsetStore(offsets_file) if offsets_file else MemoryOffsetStore()
    if not offsets_file:
        log.warning("offset.storage.file.filename is not set: source offsets are kept in memory only and "
                    "connectors will start over after a restart")
    async def started(url: str) -> None:
        for config in connector_configs:
            name = config.get("name")
            if not name:
                raise ConnectError("a connector config file has no 'name' setting")
            await herder.put_connector_config(name, config, allow_replace=True)
            log.info("Connector %s created from its config file", name)
        if on_started is not None:
            await on_started(url)

    herder = StandaloneHerder(
        worker_id="pending", worker_config=worker_config, plugins=load_plugins(), offset_store=offset_store,
        config_store=MemoryConfigStore(), status_store=MemoryStatusStore(), kafka_cluster_id=cluster_id)
    await herder.start()

    async def on_started_with_id(url: str) -> None:
        port = int(url.rsplit(":", 1)[1].rstrip("/"))
        herder.worker.worker_id = worker_id_for(listener, worker_config["rest.advertised.host.name"], port)
        await started(url)

    await serve(herder, listener, on_started=on_started_with_id, stop_event=stop_event, auth=auth,
                ssl_context=ssl_context)
