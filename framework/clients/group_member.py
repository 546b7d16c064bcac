"""A member of a Kafka group that consumes nothing: Kafka's group protocol with the caller's own metadata.

Connect's distributed workers form a group through the same JoinGroup / SyncGroup / Heartbeat
protocol consumers use, but what members exchange is theirs (Java: ``AbstractCoordinator``, in
the client library, under Connect's ``WorkerCoordinator``). :class:`GroupMember` is that lower
half over aiokafka's coordinator: an aiokafka consumer subscribed to one topic only so the
coordinator has a topic to talk about, whose assignor carries the caller's bytes — the member's
metadata on join, the leader's assignments back. No partition is ever assigned, so nothing is
fetched. What the bytes mean, and what to do at each point of a rebalance, is the
:class:`GroupProtocol` the caller passes (the runtime's worker protocol).

aiokafka leaves a group whose consumer has not polled for ``max_poll_interval_ms``; a background
coroutine this member owns polls (and gets nothing) every second so it never looks idle.
``rebalance_timeout_ms`` becomes that interval, as it is the time members have to rejoin.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

from mirrorline.clients.consumer import FETCH_LOOP_WAKEUP_MS
from mirrorline.clients.kafka_clients import client_kwargs

log = logging.getLogger(__name__)


class GroupProtocol(ABC):
    """What a :class:`GroupMember` exchanges with its group, and what it does at each step of a rebalance."""

    #: The assignment strategy's name; every member of a group must offer the same.
    name: str

    @abstractmethod
    def metadata(self) -> bytes:
        """This member's join metadata."""

    @abstractmethod
    def assign(self, leader: str, members: Mapping[str, bytes]) -> dict[str, bytes]:
        """On the leader only: every member's assignment from every member's metadata (``leader``: our id).
        A member left out of the answer gets empty bytes."""

    @abstractmethod
    def on_assignment(self, assignment: bytes) -> None:
        """This member's assignment as the leader sent it (called before :meth:`after_sync`)."""

    @abstractmethod
    async def before_rejoin(self) -> None:
        """Called before (re)joining; heartbeats go on meanwhile."""

    @abstractmethod
    async def after_sync(self) -> None:
        """Called once the group has synced (after :meth:`on_assignment`)."""


class _Assignor(AbstractPartitionAssignor):
    """aiokafka's assignor interface carrying a GroupProtocol's bytes as the protocol's user data."""

    def __init__(self, member: GroupMember, protocol: GroupProtocol):
        self._member = member
        self._protocol = protocol

    @property
    def name(self) -> str:
        return self._protocol.name

    def metadata(self, topics) -> ConsumerProtocolMemberMetadata:
        return ConsumerProtocolMemberMetadata(0, sorted(topics), self._protocol.metadata())

    def assign(self, cluster, members) -> dict[str, ConsumerProtocolMemberAssignment]:
        answers = self._protocol.assign(self._member.member_id,
                                        {member_id: metadata.user_data for member_id, metadata in members.items()})
        return {m: ConsumerProtocolMemberAssignment(0, [], answers.get(m, b"")) for m in members}

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        self._protocol.on_assignment(assignment.user_data)


class _Rebalances(ConsumerRebalanceListener):
    def __init__(self, protocol: GroupProtocol):
        self._protocol = protocol

    async def on_partitions_revoked(self, revoked) -> None:
        await self._protocol.before_rejoin()

    async def on_partitions_assigned(self, assigned) -> None:
        await self._protocol.after_sync()


class GroupMember:
    """One member of ``group_id``: join, heartbeat, rebalance, leave (see the module docstring).

    ``client_props``: Java-style client settings (bootstrap, security); the group settings are the
    keyword arguments.
    """

    def __init__(self, group_id: str, topic: str, client_props: Mapping[str, Any], protocol: GroupProtocol, *,
                 session_timeout_ms: int = 10000, heartbeat_interval_ms: int = 3000,
                 rebalance_timeout_ms: int = 60000):
        self.group_id = group_id
        self.topic = topic
        self._protocol = protocol
        kwargs, _ = client_kwargs(client_props, "consumer")
        for managed in ("group_id", "session_timeout_ms", "heartbeat_interval_ms", "max_poll_interval_ms",
                        "rebalance_timeout_ms", "enable_auto_commit", "partition_assignment_strategy"):
            kwargs.pop(managed, None)  # set from the arguments below
        # The member is assigned no partitions, so its fetch loop has nothing to do; at aiokafka's
        # 200-ms default it still woke five times a second (each worker has one member per flow).
        self._consumer = AIOKafkaConsumer(
            **{"consumer_timeout_ms": FETCH_LOOP_WAKEUP_MS, **kwargs}, group_id=group_id, enable_auto_commit=False,
            partition_assignment_strategy=(_Assignor(self, protocol),), session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms, max_poll_interval_ms=rebalance_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms)
        self._poller: asyncio.Task | None = None

    @property
    def member_id(self) -> str:
        """This member's id in the group (empty before the first join)."""
        coordinator = self._consumer._coordinator  # aiokafka keeps membership on its coordinator
        return coordinator.member_id if coordinator is not None else ""

    @property
    def generation(self) -> int:
        """The group generation this member belongs to (-1 when it is not a member)."""
        coordinator = self._consumer._coordinator
        return coordinator.generation if coordinator is not None else -1

    async def start(self) -> None:
        """Join the group; the first assignment arrives through the protocol."""
        self._consumer.subscribe([self.topic], listener=_Rebalances(self._protocol))
        await self._consumer.start()
        self._poller = asyncio.get_running_loop().create_task(self._keep_polling(), name=f"group-member-{self.group_id}")

    def request_rejoin(self) -> None:
        """Ask for a rebalance."""
        coordinator = self._consumer._coordinator
        if coordinator is not None:
            coordinator.request_rejoin()

    async def stop(self) -> None:
        """Leave the group (the others rebalance at once instead of waiting for the session timeout)."""
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        await self._consumer.stop()

    async def _keep_polling(self) -> None:
        while True:
            try:
                # assigned nothing, it never returns early: a long wait wakes the loop less often, and
                # aiokafka counts the member as polling while a getmany waits (max.poll.interval)
                await self._consumer.getmany(timeout_ms=FETCH_LOOP_WAKEUP_MS)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. the coordinator errors surfaced here
                log.warning("Group %s: %s; retrying", self.group_id, exc)
                await asyncio.sleep(1)
