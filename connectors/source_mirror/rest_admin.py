"""``/admin/mirroring/*``: IBM Event Streams-style topic-selection controls, as a REST extension.

Served by every worker of a worker cluster that has MirrorSource connectors (in distributed
mode any worker answers for the whole cluster: configs and task configs come from the config
topic through ``cluster_state``):

- ``GET /admin/mirroring/topic-selection``: ``{"includes": [regex, ...]}``, the effective
  selection (the stored one, else the connector's ``topics``);
- ``POST /admin/mirroring/topic-selection`` with ``{"includes": [regex, ...]}``: replaces the
  selection (``[""]`` or ``[]`` selects no topic); 200 with the new selection, as IBM's API;
- ``DELETE /admin/mirroring/topic-selection``: forgets the stored selection, so the configured
  ``topics`` apply again; 200 with the effective selection (beyond IBM's API);
- ``GET /admin/mirroring/active-topics``: ``{"active_topics": [...]}``, the source topics the
  connector's tasks are assigned (their ``task.assigned.partitions``).

``?connector=NAME`` addresses one MirrorSource connector; without it every MirrorSource
connector of the cluster is addressed, and with more than one the answer adds
``"connectors": {name: {...}}`` (see :mod:`mirrorline.connectors.source_mirror.selection_admin`). The
selection is stored on each connector's target cluster; the connector reads it at every
topic refresh, so a change takes effect within ``refresh.topics.interval.seconds`` without
restarting anything.
"""

from __future__ import annotations

from typing import Any

from mirrorline.api import (BadRequestError, ClusterState, KafkaClients, NotFoundError, RestExtension, RestExtensionContext,
                           RestRequest)

from mirrorline.connectors.source_mirror.selection_admin import (
    MirrorTarget,
    active_topics_body,
    is_mirror_source,
    parse_selection_request,
    read_selection,
    selection_body,
    write_selection,
)
from mirrorline.connectors.source_mirror.topics import assigned_topics

TOPIC_SELECTION_PATH = "/admin/mirroring/topic-selection"
ACTIVE_TOPICS_PATH = "/admin/mirroring/active-topics"
#: Query parameter naming one MirrorSource connector.
CONNECTOR_PARAM = "connector"


async def mirror_targets(state: ClusterState, connector: str | None,
                         clients: KafkaClients | None = None) -> list[MirrorTarget]:
    """The MirrorSource connectors a request addresses: ``connector`` alone, or all of the cluster.

    Their configs are resolved (config-provider references replaced), since they make the clients
    that reach each connector's target cluster.

    NotFoundError (404) when ``connector`` does not exist or the cluster has no MirrorSource
    connector; BadRequestError (400) when ``connector`` is not a MirrorSource connector.
    """
    if connector is not None:
        config = await state.connector_config(connector)
        if not is_mirror_source(config):
            raise BadRequestError(f"Connector {connector} is not a MirrorSource connector "
                                  f"(its connector.class is {config.get('connector.class')!r})")
        return [MirrorTarget(connector, await state.resolved_connector_config(connector), clients)]
    targets = []
    for name in await state.connectors():
        try:
            if is_mirror_source(await state.connector_config(name)):
                targets.append(MirrorTarget(name, await state.resolved_connector_config(name), clients))
        except NotFoundError:  # deleted meanwhile
            continue
    if not targets:
        raise NotFoundError("Mirroring is not set up: this worker cluster has no MirrorSource connector "
                            "(GET /connectors lists its connectors)")
    return targets


class MirroringRestExtension(RestExtension):
    """Adds the ``/admin/mirroring`` routes (topic selection, active topics)."""

    def register(self, context: RestExtensionContext) -> None:
        """Add the four routes; keep the cluster state for the handlers."""
        self._state = context.cluster_state
        self._clients = context.clients
        context.add_route("GET", TOPIC_SELECTION_PATH, self.get_topic_selection,
                          summary="Mirroring topic selection: the include patterns in effect (IBM Event Streams API)")
        context.add_route("POST", TOPIC_SELECTION_PATH, self.set_topic_selection,
                          summary='Replace the mirroring topic selection: {"includes": [regex, ...]}; [""] selects '
                                  "no topic (IBM Event Streams API)")
        context.add_route("DELETE", TOPIC_SELECTION_PATH, self.reset_topic_selection,
                          summary="Forget the stored topic selection: the connectors' configured topics apply again")
        context.add_route("GET", ACTIVE_TOPICS_PATH, self.get_active_topics,
                          summary="Source topics being actively mirrored (IBM Event Streams API)")

    async def _targets(self, request: RestRequest) -> list[MirrorTarget]:
        return await mirror_targets(self._state, request.query.get(CONNECTOR_PARAM), self._clients)

    async def get_topic_selection(self, request: RestRequest) -> tuple[int, Any]:
        """200 ``{"includes": [...]}`` (see the module docstring for several connectors)."""
        targets = await self._targets(request)
        return 200, selection_body({t.name: await read_selection(t) for t in targets})

    async def set_topic_selection(self, request: RestRequest) -> tuple[int, Any]:
        """Store the body's ``includes`` for the addressed connectors; 200 with the new selection."""
        includes = parse_selection_request(request.json())
        targets = await self._targets(request)
        return 200, selection_body({t.name: await write_selection(t, includes) for t in targets})

    async def reset_topic_selection(self, request: RestRequest) -> tuple[int, Any]:
        """Remove the stored selection of the addressed connectors; 200 with the selection now in effect."""
        targets = await self._targets(request)
        return 200, selection_body({t.name: await write_selection(t, None) for t in targets})

    async def get_active_topics(self, request: RestRequest) -> tuple[int, Any]:
        """200 ``{"active_topics": [...]}``: the topics the connectors' current task configs assign."""
        targets = await self._targets(request)
        return 200, active_topics_body({t.name: assigned_topics(await self._state.task_configs(t.name))
                                        for t in targets})
