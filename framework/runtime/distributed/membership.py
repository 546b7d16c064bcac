"""Group membership of a distributed worker, through Kafka's group protocol (aiokafka's coordinator).

A :class:`WorkerGroupMember` is an aiokafka consumer that never consumes: it joins the
worker group (``group.id``) subscribed to the config topic only so the coordinator has a
topic to talk about, and carries everything that matters in the protocol's user data — the
worker's :class:`~mirrorline.runtime.distributed.assignment.MemberState` on join, and the
leader's :class:`~mirrorline.runtime.distributed.assignment.Assignment` back. No partition is
ever assigned, so nothing is fetched.

The :class:`MembershipListener` (the herder) is called at the three points of a rebalance:
``before_rejoin`` before the worker joins (it may stop work; heartbeats go on meanwhile),
``member_state`` when the join request is built, ``assign`` on the leader, and
``on_assignment`` with this worker's share once the group has synced.

aiokafka leaves a group whose consumer has not polled for ``max_poll_interval_ms``; an owned
background coroutine polls (and gets nothing) every second so the member never looks idle.
``rebalance.timeout.ms`` becomes that interval, as it is the time members have to rejoin.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.runtime.background import BackgroundTasks
from mirrorline.runtime.distributed.assignment import Assignment, MemberState

log = logging.getLogger(__name__)

#: The assignment strategy name; every worker of a group must offer it.
PROTOCOL_NAME = "mirrorline-incremental-v1"


class MembershipListener(ABC):
    """What the group member asks of its worker during a rebalance (implemented by the herder)."""

    @abstractmethod
    async def before_rejoin(self, membership_lost: bool) -> None:
        """Called before (re)joining. ``membership_lost``: the group dropped this worker (session
        expired, or fenced), so others may already own its work: stop all of it now."""

    @abstractmethod
    def member_state(self) -> MemberState:
        """This worker's join metadata (what it owns right now)."""

    @abstractmethod
    def assign(self, leader: str, members: Mapping[str, MemberState]) -> dict[str, Assignment]:
        """On the leader only: every member's assignment."""

    @abstractmethod
    async def on_assignment(self, assignment: Assignment, generation: int) -> None:
        """This worker's assignment for ``generation``; should return quickly (heartbeats wait)."""


class _WorkerAssignor(AbstractPartitionAssignor):
    """An aiokafka assignor whose metadata and assignments are the worker protocol's JSON."""

    name = PROTOCOL_NAME

    def __init__(self, member: WorkerGroupMember):
        self._member = member
        self.latest: Assignment | None = None

    def metadata(self, topics) -> ConsumerProtocolMemberMetadata:
        state = self._member.listener.member_state()
        return ConsumerProtocolMemberMetadata(0, sorted(topics), state.encode())

    def assign(self, cluster, members) -> dict[str, ConsumerProtocolMemberAssignment]:
        states = {}
        for member_id, metadata in members.items():
            try:
                states[member_id] = MemberState.decode(metadata.user_data)
            except ValueError as exc:
                log.error("Group member %s sent metadata that is not a mirrorline worker's (%s); it gets "
                          "nothing. Is another application using group.id %s?", member_id, exc,
                          self._member.group_id)
        leader = self._member.member_id
        assignments = self._member.listener.assign(leader, states)
        empty = Assignment(leader, states[leader].url if leader in states else "", -1).encode()
        return {m: ConsumerProtocolMemberAssignment(0, [], assignments[m].encode() if m in assignments else empty)
                for m in members}

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        try:
            self.latest = Assignment.decode(assignment.user_data)
        except ValueError as exc:
            log.error("Received an assignment this worker cannot read (%s); waiting for the next one", exc)
            self.latest = None


class _Rebalances(ConsumerRebalanceListener):
    def __init__(self, member: WorkerGroupMember):
        self._member = member

    async def on_partitions_revoked(self, revoked) -> None:
        await self._member._before_rejoin()

    async def on_partitions_assigned(self, assigned) -> None:
        await self._member._after_sync()


class WorkerGroupMember:
    """This worker's membership of its group: join, heartbeat, rebalance, leave."""

    def __init__(self, group_id: str, topic: str, client_props: Mapping[str, Any], listener: MembershipListener, *,
                 session_timeout_ms: int = 10000, heartbeat_interval_ms: int = 3000,
                 rebalance_timeout_ms: int = 60000):
        self.group_id = group_id
        self.topic = topic
        self.listener = listener
        self._assignor = _WorkerAssignor(self)
        kwargs, _ = client_kwargs({k: v for k, v in client_props.items()
                                   if not k.startswith(("producer.", "consumer.", "admin."))}, "consumer")
        for managed in ("group_id", "session_timeout_ms", "heartbeat_interval_ms", "max_poll_interval_ms",
                        "rebalance_timeout_ms", "enable_auto_commit", "partition_assignment_strategy"):
            kwargs.pop(managed, None)  # set from the worker's own settings below
        self._consumer = AIOKafkaConsumer(
            **kwargs, group_id=group_id, enable_auto_commit=False,
            partition_assignment_strategy=(self._assignor,), session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms, max_poll_interval_ms=rebalance_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms)
        self._background = BackgroundTasks(f"group-member-{group_id}")
        self._joined_once = False

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
        """Join the group; the first assignment arrives through the listener."""
        self._consumer.subscribe([self.topic], listener=_Rebalances(self))
        await self._consumer.start()
        self._background.spawn(self._keep_polling(), "poll")

    def request_rejoin(self) -> None:
        """Ask for a rebalance (config changes, or after letting revoked work go)."""
        coordinator = self._consumer._coordinator
        if coordinator is not None:
            coordinator.request_rejoin()

    async def stop(self) -> None:
        """Leave the group (the others rebalance at once instead of waiting for the session timeout)."""
        await self._background.close()
        await self._consumer.stop()

    async def _keep_polling(self) -> None:
        while True:
            try:
                await self._consumer.getmany(timeout_ms=1000)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. the coordinator errors surfaced here
                log.warning("Worker group %s: %s; retrying", self.group_id, exc)
                await asyncio.sleep(1)

    async def _before_rejoin(self) -> None:
        lost = self._joined_once and self.generation < 0
        await self.listener.before_rejoin(lost)

    async def _after_sync(self) -> None:
        self._joined_once = True
        assignment, self._assignor.latest = self._assignor.latest, None
        if assignment is not None:
            await self.listener.on_assignment(assignment, self.generation)
