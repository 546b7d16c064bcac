"""The mirroring topic selection store: which topics a MirrorSource connector mirrors, changed at run time.

IBM Event Streams' geo-replication lets an operator replace the set of mirrored topics with a
list of regular expressions while mirroring runs. mirrorline keeps that selection in a
compacted topic on the flow's **target** cluster, :data:`TOPIC`
(``mirrorline-topic-selection.internal``; the ``.internal`` suffix keeps it out of MM2's
default ``topics.exclude``, so no flow mirrors it):

- key: JSON ``{"connector": <connector name>, "source": <source alias>, "target": <target alias>}``
  (:class:`SelectionKey`);
- value: JSON ``{"includes": [regex, ...], "updated": <epoch ms>}`` (:class:`StoredSelection`);
  a null value (tombstone) means "back to the connector's configured ``topics``".

The includes replace the connector's ``topics`` list; ``topics.exclude`` still applies. They use
the dialect of :mod:`mirrorline.connectors.mirror_client.filters` (full match, Python's ``re`` with
``re.ASCII``): :func:`check_includes` validates them as ``topics`` is validated. An empty list,
or ``[""]`` (IBM's way to say it), selects no topic.

:class:`TopicSelectionStore` reads the topic from its beginning to its end (it is small) and
writes to it, with the connector's ``target.cluster.*`` client settings (security included). It
never creates the topic by reading it: only :meth:`TopicSelectionStore.write` creates it
(compacted, one partition, the connector's ``replication.factor``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mirrorline.api import (Admin, ConnectError, Consumer, KafkaClients, NewTopic, TopicAlreadyExistsError,
                            TopicAuthorizationFailedError, TopicPartition, UnknownTopicOrPartitionError)
from mirrorline.api.rest_extension import json_type

from mirrorline.connectors.mirror_client.clients import admin_client, connect_admin, consumer_for, read_to_end
from mirrorline.connectors.mirror_client.config import client_props
from mirrorline.connectors.mirror_client.filters import compile_pattern_list

#: The compacted topic on the target cluster that holds every selection.
TOPIC = "mirrorline-topic-selection.internal"
#: The field of a selection (REST body, stored value) that lists the regular expressions.
INCLUDES = "includes"


class SelectionAccessDenied(ConnectError):
    """The client's principal may not describe or read :data:`TOPIC` (HTTP 403 when it reaches the REST API)."""

    http_status = 403


def check_includes(value: Any) -> list[str]:
    """``value`` as a list of include patterns; ValueError naming the problem (and the bad pattern).

    It must be a list of strings, each a regular expression ``topics`` would accept, and the
    list joined with ``|`` must compile too (a global flag such as ``(?i)`` only at the start).
    """
    if not isinstance(value, list):
        raise ValueError(f"'{INCLUDES}' must be an array of regular expressions, not {json_type(value)}")
    for index, pattern in enumerate(value):
        if not isinstance(pattern, str):
            raise ValueError(f"'{INCLUDES}'[{index}] must be a string (a regular expression), "
                             f"not {json_type(pattern)}")
    for pattern in value:
        compile_pattern_list(INCLUDES, [pattern])
    compile_pattern_list(INCLUDES, value)
    return list(value)


@dataclass(frozen=True)
class SelectionKey:
    """Whose selection a record holds: a connector and its flow ``source->target``."""

    connector: str
    source: str
    target: str

    def encode(self) -> bytes:
        """The record key: compact JSON with the fields in a fixed order (so compaction keeps one record)."""
        return json.dumps({"connector": self.connector, "source": self.source, "target": self.target},
                          separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @classmethod
    def decode(cls, raw: bytes | None) -> SelectionKey:
        """Parse a record key; ValueError when it is not one of ours."""
        data = json.loads(raw) if raw is not None else None
        if not isinstance(data, dict) or not all(isinstance(data.get(f), str) for f in ("connector", "source",
                                                                                        "target")):
            raise ValueError(f"not a topic selection key: {raw!r}")
        return cls(data["connector"], data["source"], data["target"])


@dataclass(frozen=True)
class StoredSelection:
    """A stored selection: the include patterns and when they were written (epoch ms)."""

    includes: tuple[str, ...]
    updated: int

    def encode(self) -> bytes:
        """The record value."""
        return json.dumps({INCLUDES: list(self.includes), "updated": self.updated},
                          separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @classmethod
    def decode(cls, raw: bytes | None) -> StoredSelection | None:
        """Parse a record value (None for a tombstone); ValueError when it is malformed."""
        if raw is None:
            return None
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("a topic selection must be a JSON object")
        includes = check_includes(data.get(INCLUDES))
        updated = data.get("updated", 0)
        return cls(tuple(includes), updated if isinstance(updated, int) else 0)


class TopicSelectionStore:
    """Reads and writes :data:`TOPIC` on a connector's target cluster; use as ``async with`` or :meth:`close`.

    ``originals`` is the connector's config (strings), whose ``target.cluster.*``,
    ``consumer.*`` / ``producer.*`` / ``admin.*`` and ``target.<role>.*`` layers make the clients.
    ``admin`` is a started admin client of the target cluster to use instead of making one (it is
    then not closed here). Clients are made when first needed.
    """

    def __init__(self, clients: KafkaClients, originals: Mapping[str, Any], client_id: str,
                 admin: Admin | None = None) -> None:
        """Nothing connects until the first read or write. ``clients``: the caller's context's."""
        self._clients = clients
        self._originals = {str(k): str(v) for k, v in originals.items()}
        self._client_id = client_id
        self._admin = admin
        self._own_admin = admin is None
        self._consumer: Consumer | None = None

    async def __aenter__(self) -> TopicSelectionStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _admin_client(self) -> Admin:
        if self._admin is None:
            admin = admin_client(self._clients, self._originals, "target", self._client_id)
            await connect_admin(admin, self._originals, "target")
            self._admin = admin
        return self._admin

    async def partitions(self) -> int:
        """How many partitions :data:`TOPIC` has (0 when it does not exist); ConnectError if it cannot be told."""
        admin = await self._admin_client()
        for entry in await admin.describe_topics([TOPIC]):
            if entry.name != TOPIC:
                continue
            if isinstance(entry.error, UnknownTopicOrPartitionError):
                return 0
            if isinstance(entry.error, TopicAuthorizationFailedError):
                raise SelectionAccessDenied(f"not authorized to describe topic {TOPIC} on the target cluster: "
                                            f"grant DESCRIBE and READ on it (and WRITE and CREATE to change "
                                            f"selections)")
            if entry.error is not None:
                raise ConnectError(f"cannot describe topic {TOPIC} on the target cluster: "
                                   f"{type(entry.error).__name__} ({entry.error})")
            return len(entry.partitions)
        return 0

    async def read_all(self) -> dict[SelectionKey, StoredSelection]:
        """Every stored selection (tombstoned ones left out); records that are not ours are skipped."""
        count = await self.partitions()
        if count == 0:
            return {}
        if self._consumer is None:
            consumer = consumer_for(self._clients, self._originals, "target", self._client_id)
            await consumer.start()
            self._consumer = consumer
        selections: dict[SelectionKey, StoredSelection | None] = {}

        def keep(record: Any) -> None:
            try:
                selections[SelectionKey.decode(record.key)] = StoredSelection.decode(record.value)
            except (ValueError, TypeError):
                return

        try:
            for partition in range(count):
                await read_to_end(self._consumer, TopicPartition(TOPIC, partition), keep)
        except TopicAuthorizationFailedError:
            raise SelectionAccessDenied(f"not authorized to read topic {TOPIC} on the target cluster: grant "
                                        f"READ on it") from None
        return {key: value for key, value in selections.items() if value is not None}

    async def read(self, key: SelectionKey) -> StoredSelection | None:
        """The stored selection of ``key`` (None: none, the connector's ``topics`` apply)."""
        return (await self.read_all()).get(key)

    async def _create_topic(self, replication_factor: int) -> None:
        admin = await self._admin_client()
        response = await admin.create_topics([NewTopic(TOPIC, 1, replication_factor, {"cleanup.policy": "compact"})])
        for _topic, error in response.items():
            if error is not None and not isinstance(error, TopicAlreadyExistsError):
                raise ConnectError(f"cannot create topic {TOPIC} on the target cluster: {error}")

    async def write(self, key: SelectionKey, includes: list[str] | None, replication_factor: int,
                    ) -> StoredSelection | None:
        """Store ``includes`` for ``key`` (None: a tombstone, back to ``topics``); returns what was stored.

        Creates :data:`TOPIC` first when it does not exist (compacted, one partition,
        ``replication_factor``). The record is acknowledged by all in-sync replicas on return.
        """
        selection = None if includes is None else StoredSelection(tuple(check_includes(includes)),
                                                                  int(time.time() * 1000))
        if await self.partitions() == 0:
            await self._create_topic(replication_factor)
        props = {"client.id": self._client_id, **client_props(self._originals, "target", "producer"), "acks": "all"}
        producer = self._clients.producer(props)
        await producer.start()
        try:
            await producer.send_and_wait(TOPIC, key=key.encode(),
                                         value=None if selection is None else selection.encode())
        finally:
            await producer.stop()
        return selection

    async def close(self) -> None:
        """Close the clients made here (idempotent)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()
        if self._own_admin and self._admin is not None:
            admin, self._admin = self._admin, None
            await admin.close()
