"""Group membership of a distributed worker, through Kafka's group protocol (Connect's ``WorkerCoordinator``).

A :class:`WorkerGroupMember` joins the worker group (``group.id``) as a
:class:`~mirrorline.clients.group_member.GroupMember` of the client layer (which runs Kafka's
group protocol and consumes nothing), and carries everything that matters in the protocol's
metadata — the worker's :class:`~mirrorline.runtime.distributed.assignment.MemberState` on join,
and the leader's :class:`~mirrorline.runtime.distributed.assignment.Assignment` back.

The :class:`MembershipListener` (the herder) is called at the three points of a rebalance:
``before_rejoin`` before the worker joins (it may stop work; heartbeats go on meanwhile),
``member_state`` when the join request is built, ``assign`` on the leader, and
``on_assignment`` with this worker's share once the group has synced.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from mirrorline.clients.group_member import GroupMember, GroupProtocol
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


class _WorkerProtocol(GroupProtocol):
    """The worker protocol's JSON as the group member's bytes, and the listener called at each step."""

    name = PROTOCOL_NAME

    def __init__(self, member: WorkerGroupMember):
        self._member = member
        self.latest: Assignment | None = None

    def metadata(self) -> bytes:
        return self._member.listener.member_state().encode()

    def assign(self, leader: str, members: Mapping[str, bytes]) -> dict[str, bytes]:
        states = {}
        for member_id, metadata in members.items():
            try:
                states[member_id] = MemberState.decode(metadata)
            except ValueError as exc:
                log.error("Group member %s sent metadata that is not a mirrorline worker's (%s); it gets "
                          "nothing. Is another application using group.id %s?", member_id, exc,
                          self._member.group_id)
        assignments = self._member.listener.assign(leader, states)
        empty = Assignment(leader, states[leader].url if leader in states else "", -1).encode()
        return {m: assignments[m].encode() if m in assignments else empty for m in members}

    def on_assignment(self, assignment: bytes) -> None:
        try:
            self.latest = Assignment.decode(assignment)
        except ValueError as exc:
            log.error("Received an assignment this worker cannot read (%s); waiting for the next one", exc)
            self.latest = None

    async def before_rejoin(self) -> None:
        await self._member._before_rejoin()

    async def after_sync(self) -> None:
        await self._member._after_sync()


class WorkerGroupMember:
    """This worker's membership of its group: join, heartbeat, rebalance, leave."""

    def __init__(self, group_id: str, topic: str, client_props: Mapping[str, Any], listener: MembershipListener, *,
                 session_timeout_ms: int = 10000, heartbeat_interval_ms: int = 3000,
                 rebalance_timeout_ms: int = 60000):
        self.group_id = group_id
        self.topic = topic
        self.listener = listener
        self._protocol = _WorkerProtocol(self)
        self._member = GroupMember(
            group_id, topic, {k: v for k, v in client_props.items() if not k.startswith(("producer.", "consumer.",
                                                                                         "admin."))},
            self._protocol, session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
            rebalance_timeout_ms=rebalance_timeout_ms)
        self._joined_once = False

    @property
    def member_id(self) -> str:
        """This member's id in the group (empty before the first join)."""
        return self._member.member_id

    @property
    def generation(self) -> int:
        """The group generation this member belongs to (-1 when it is not a member)."""
        return self._member.generation

    async def start(self) -> None:
        """Join the group; the first assignment arrives through the listener."""
        await self._member.start()

    def request_rejoin(self) -> None:
        """Ask for a rebalance (config changes, or after letting revoked work go)."""
        self._member.request_rejoin()

    async def stop(self) -> None:
        """Leave the group (the others rebalance at once instead of waiting for the session timeout)."""
        await self._member.stop()

    async def _before_rejoin(self) -> None:
        lost = self._joined_once and self.generation < 0
        await self.listener.before_rejoin(lost)

    async def _after_sync(self) -> None:
        self._joined_once = True
        assignment, self._protocol.latest = self._protocol.latest, None
        if assignment is not None:
            await self.listener.on_assignment(assignment, self.generation)
