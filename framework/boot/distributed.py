"""``mirrorline distributed``: one worker of a cluster, with its REST API, until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from mirrorline.boot.process import (forwarding_ssl_context, kafka_cluster_id, load_plugins, parse_listener,
                                     rest_security, serve, worker_id_for)
from mirrorline.rest.forwarding import WorkerClient
from mirrorline.runtime.config_providers import resolve_worker_settings
from mirrorline.runtime.distributed.herder import DistributedHerder
from mirrorline.runtime.worker_config import DISTRIBUTED_CONFIG_DEF

log = logging.getLogger(__name__)


async def run_distributed(worker_raw: dict[str, str], *, stop_event: asyncio.Event | None = None,
                          on_started: Callable[[str], Awaitable[None]] | None = None) -> None:
    """Run a distributed worker until stopped: REST first (so its URL is known), then join the group.

    With authentication on, requests this worker forwards are signed with the cluster's session
    key, which the leader keeps in the config topic (see :mod:`mirrorline.rest.auth`).
    """
    worker_raw = await asyncio.to_thread(resolve_worker_settings, worker_raw)
    worker_config = DISTRIBUTED_CONFIG_DEF.parse(worker_raw)
    listener = parse_listener(worker_config["listeners"])
    # checked before Kafka is contacted; the herder the lambda names exists before anything is served
    auth, ssl_context = rest_security(worker_config, listener, session_keys=lambda: herder.session_keys())
    client_context = forwarding_ssl_context(worker_config, listener)
    cluster_id = await kafka_cluster_id(worker_config)
    herder = DistributedHerder(worker_raw, worker_config, load_plugins(), kafka_cluster_id=cluster_id)
    forwarder = WorkerClient(ssl_context=client_context, signing_key=herder.request_signing_key)

    async def join(url: str) -> None:
        port = int(url.rsplit(":", 1)[1].rstrip("/"))
        worker_id = worker_id_for(listener, worker_config["rest.advertised.host.name"], port)
        herder.set_url(f"{listener.scheme}://{worker_id}", worker_id)
        await herder.start()
        if on_started is not None:
            await on_started(url)

    await serve(herder, listener, on_started=join, stop_event=stop_event, auth=auth, ssl_context=ssl_context,
                forwarder=forwarder)
