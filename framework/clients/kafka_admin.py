"""Kafka admin operations MirrorMaker 2 needs that aiokafka's admin client does not offer.

aiokafka 0.14's :class:`~aiokafka.admin.AIOKafkaAdminClient` is thin (and marked experimental).
MM2 needs four things it lacks or only half-offers:

- **incremental alter configs** (IncrementalAlterConfigs, API key 44). aiokafka only has the
  legacy AlterConfigs (key 33), which *replaces* a resource's whole config: every config left
  out is reset to its default. MM2 (Kafka 4.x) syncs topic configs only incrementally.
- **alter consumer group offsets**: an OffsetCommit (key 8) with generation ``-1`` and an empty
  member id, sent to the group coordinator. The broker accepts it only while the group has no
  active members, which is the same precondition MM2's checkpoint task checks.
- **delete consumer group offsets** (OffsetDelete, key 47).
- **read a group's committed offsets** (OffsetFetch, key 9) at a remembered coordinator, with the
  group-level error code read: aiokafka's ``list_consumer_group_offsets`` looks the coordinator up
  on every call and returns no offsets when the group-level code says the coordinator moved.
  (Many groups per request: :mod:`.group_offsets`.)
- **the state of a group** ("Empty", "Stable", ...), read from aiokafka's raw
  ``describe_consumer_groups`` response.
- **fence producers** (Admin ``fenceProducers``, KIP-730): an InitProducerId (key 22) with the
  transactional id and no producer id, sent to the id's transaction coordinator. It bumps the id's
  epoch and aborts its open transaction, so a producer still holding the old epoch (a zombie task)
  can write nothing more. aiokafka's admin client has no such call.
- **topics with the broker's default partitions or replication factor**: aiokafka's CreateTopics
  goes up to v3, where both must be given; v4 (KIP-464) takes ``-1`` for "the broker's default",
  which Kafka Connect's topic creation (KIP-158) offers. :func:`create_topics` sends v4.
- **describe and create ACLs** (DescribeAcls, key 29; CreateAcls, key 30): aiokafka defines
  the request classes but its admin client has no methods for them. :class:`AclBinding` and
  :class:`AclFilter` (plugin contract, defined in :mod:`mirrorline.api.clients`) carry Kafka's numeric codes (:class:`ResourceType`, :class:`PatternType`,
  :class:`AclOperation`, :class:`AclPermissionType`).

The requests are defined here with aiokafka's own protocol building blocks
(``Request``/``RequestStruct``/``Response`` and ``aiokafka.protocol.types``) and sent with
``admin._client.send(node_id, request)``; the version is negotiated per connection by
``Request.prepare``. Only non-flexible versions are defined:

- IncrementalAlterConfigs **v0** (v1 is already the first flexible version);
- CreateTopics **v4** (v5 is the first flexible version; v4 has v3's fields);
- OffsetCommit **v2/v3** from aiokafka itself (KIP-896 removed v0/v1 in Kafka 4.0);
- OffsetDelete **v0** (its only version);
- InitProducerId **v0** from aiokafka itself (what its transactional producer sends);
- DescribeAcls / CreateAcls **v1** from aiokafka itself (KIP-896 removed v0 in Kafka 4.0).

This touches a private attribute (``admin._client``), so aiokafka is pinned to ``>=0.14,<0.15``.
Every function takes an admin client that has already been ``start()``-ed.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import TypeAlias

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import ClusterAuthorizationFailedError, KafkaError, for_code
from aiokafka.protocol.admin import (CreateAclsRequest, CreateTopicsRequest_v3, CreateTopicsResponse_v3,
                                     DescribeAclsRequest)
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.client import CoordinationType
from aiokafka.errors import TransactionalIdAuthorizationFailed
from aiokafka.protocol.commit import OffsetCommitRequest, OffsetFetchRequest
from aiokafka.protocol.transaction import InitProducerIdRequest
from aiokafka.protocol.types import Array, Boolean, Int8, Int16, Int32, Schema, String

from mirrorline.api.clients import (AclBinding, AclFilter, AclOperation, AclPermissionType, PatternType,
                                   ResourceType)
from mirrorline.api.errors import GroupNotEmptyError
from mirrorline.api.errors import KafkaError as ContractKafkaError
from mirrorline.clients.group_offsets import COORDINATOR_CODES

__all__ = [
    "AclBinding",
    "AclFilter",
    "AclOperation",
    "AclPermissionType",
    "GroupNotEmptyError",
    "PatternType",
    "ResourceType",
    "alter_consumer_group_offsets",
    "create_topic",
    "create_topics",
    "create_acls",
    "describe_acls",
    "delete_consumer_group_offsets",
    "describe_consumer_group_state",
    "fence_producers",
    "incremental_alter_configs",
]

RESOURCE_TOPIC = 2
OP_SET = 0
OP_DELETE = 1

# Error codes that mean "the group has active members" for an admin offset commit/delete.
_UNKNOWN_MEMBER_ID = 25
_REBALANCE_IN_PROGRESS = 27
_ILLEGAL_GENERATION = 22
_NON_EMPTY_GROUP = 68
_GROUP_SUBSCRIBED_TO_TOPIC = 86
_GROUP_ACTIVE_CODES = {_UNKNOWN_MEMBER_ID, _REBALANCE_IN_PROGRESS, _ILLEGAL_GENERATION, _NON_EMPTY_GROUP,
                       _GROUP_SUBSCRIBED_TO_TOPIC}


def _group_not_empty(group: str, error_code: int, detail: str = "") -> GroupNotEmptyError:
    """The contract's error for an admin offset change the broker refused because the group has active members."""
    name = ("GROUP_SUBSCRIBED_TO_TOPIC" if error_code == _GROUP_SUBSCRIBED_TO_TOPIC  # unknown to aiokafka
            else getattr(for_code(error_code), "message", str(error_code)))
    return GroupNotEmptyError(group, f"consumer group {group!r} has active members ({name})"
                                     f"{': ' + detail if detail else ''}", code=error_code)


# --- IncrementalAlterConfigs (key 44), v0 -----------------------------------------------------


class IncrementalAlterConfigsResponse_v0(Response):
    """IncrementalAlterConfigs v0 response: an error code and message per resource."""
    API_KEY = 44
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("responses", Array(
            ("error_code", Int16),
            ("error_message", String("utf-8")),
            ("resource_type", Int8),
            ("resource_name", String("utf-8")),
        )),
    )


class IncrementalAlterConfigsRequest_v0(RequestStruct):
    """IncrementalAlterConfigs v0 request (API key 44, non-flexible)."""
    API_KEY = 44
    API_VERSION = 0
    RESPONSE_TYPE = IncrementalAlterConfigsResponse_v0
    SCHEMA = Schema(
        ("resources", Array(
            ("resource_type", Int8),
            ("resource_name", String("utf-8")),
            ("configs", Array(
                ("name", String("utf-8")),
                ("config_operation", Int8),
                ("value", String("utf-8")),  # nullable
            )),
        )),
        ("validate_only", Boolean),
    )


IncrementalAlterConfigsRequestStruct: TypeAlias = IncrementalAlterConfigsRequest_v0


class IncrementalAlterConfigsRequest(Request[IncrementalAlterConfigsRequestStruct]):
    """``resources``: ``[(resource_type, resource_name, [(name, operation, value | None)])]``."""

    API_KEY = 44

    def __init__(self, resources: list, validate_only: bool = False):
        self._resources = resources
        self._validate_only = validate_only

    def build(self, request_struct_class: type[IncrementalAlterConfigsRequestStruct]):
        """Instantiate the chosen version's struct with this request's fields."""
        return request_struct_class(self._resources, self._validate_only)


# --- CreateTopics (key 19), v4 ------------------------------------------------------------------


class CreateTopicsResponse_v4(Response):
    """CreateTopics v4 response: v3's fields (throttle time; name, error code, message per topic)."""
    API_KEY = 19
    API_VERSION = 4
    SCHEMA = CreateTopicsResponse_v3.SCHEMA


class CreateTopicsRequest_v4(RequestStruct):
    """CreateTopics v4 request: v3's fields; -1 partitions or replication factor means the broker's default."""
    API_KEY = 19
    API_VERSION = 4
    RESPONSE_TYPE = CreateTopicsResponse_v4
    SCHEMA = CreateTopicsRequest_v3.SCHEMA


CreateTopicsV4Struct: TypeAlias = CreateTopicsRequest_v4


class CreateTopicsV4Request(Request[CreateTopicsV4Struct]):
    """``topics``: ``[(name, partitions, replication factor, [], [(config, value)])]``."""

    API_KEY = 19

    def __init__(self, topics: list, timeout_ms: int):
        self._topics = topics
        self._timeout_ms = timeout_ms

    def build(self, request_struct_class: type[CreateTopicsV4Struct]):
        """Instantiate the chosen version's struct with this request's fields."""
        return request_struct_class(self._topics, self._timeout_ms, False)


#: Metadata records one CreateTopics request may cost at most. A KRaft controller refuses a request
#: whose records (one per topic, one per partition, one per config) exceed 10,000, or whose partitions
#: do, with POLICY_VIOLATION "Unable to perform excessively large batch operation" (KAFKA-14996,
#: KAFKA-17870); Java MM2 sends every new topic of a refresh in one request, and creates none of them
#: past that limit (KAFKA-19327).
MAX_RECORDS_PER_CREATE_TOPICS = 5_000
#: what a topic with the broker's default partition count (-1) is counted as, not knowing num.partitions
_DEFAULT_PARTITIONS_ESTIMATE = 50


def create_topics_chunks(topics: list[tuple[str, int, int, Mapping[str, str]]],
                         limit: int | None = None) -> list[list[tuple[str, int, int, Mapping[str, str]]]]:
    """``topics`` split, in order, into requests each costing at most ``limit`` metadata records
    (default :data:`MAX_RECORDS_PER_CREATE_TOPICS`; a single topic costing more gets a request of
    its own, and the controller's answer)."""
    if limit is None:
        limit = MAX_RECORDS_PER_CREATE_TOPICS
    chunks: list[list] = []
    cost = 0
    for topic in topics:
        _name, partitions, _replication, configs = topic
        records = 1 + (partitions if partitions > 0 else _DEFAULT_PARTITIONS_ESTIMATE) + len(configs)
        if not chunks or cost + records > limit:
            chunks.append([])
            cost = 0
        chunks[-1].append(topic)
        cost += records
    return chunks


async def create_topics(admin: AIOKafkaAdminClient, topics: Iterable[tuple[str, int, int, Mapping[str, str]]],
                        timeout_ms: int = 30_000) -> dict[str, tuple[int, str | None]]:
    """Create each ``(name, partitions, replication factor, topic configs)`` with CreateTopics v4
    (``-1`` partitions or replication factor: the broker's default; aiokafka's ``NewTopic`` refuses
    -1); ``{name: (error code, error message)}`` as the controller answered (0 = created).

    Many topics go out in several requests, each within what a KRaft controller accepts
    (:data:`MAX_RECORDS_PER_CREATE_TOPICS`)."""
    answers: dict[str, tuple[int, str | None]] = {}
    for chunk in create_topics_chunks(list(topics)):
        request = CreateTopicsV4Request(
            [(name, partitions, replication, [], [(k, str(v)) for k, v in configs.items()])
             for name, partitions, replication, configs in chunk], timeout_ms)
        response = await admin._send_to_controller(request)
        answers.update({name: (code, message) for name, code, message in response.topic_errors})
    return answers


# --- OffsetDelete (key 47), v0 ----------------------------------------------------------------


class OffsetDeleteResponse_v0(Response):
    """OffsetDelete v0 response: a group error code, then an error code per partition."""
    API_KEY = 47
    API_VERSION = 0
    SCHEMA = Schema(
        ("error_code", Int16),
        ("throttle_time_ms", Int32),
        ("topics", Array(
            ("name", String("utf-8")),
            ("partitions", Array(("partition_index", Int32), ("error_code", Int16))),
        )),
    )


class OffsetDeleteRequest_v0(RequestStruct):
    """OffsetDelete v0 request (API key 47, non-flexible)."""
    API_KEY = 47
    API_VERSION = 0
    RESPONSE_TYPE = OffsetDeleteResponse_v0
    SCHEMA = Schema(
        ("group_id", String("utf-8")),
        ("topics", Array(
            ("name", String("utf-8")),
            ("partitions", Array(Int32)),  # a one-field struct {PartitionIndex} encodes as an int32
        )),
    )


OffsetDeleteRequestStruct: TypeAlias = OffsetDeleteRequest_v0


class OffsetDeleteRequest(Request[OffsetDeleteRequestStruct]):
    """``topics``: ``[(topic, [partition, ...])]``."""

    API_KEY = 47

    def __init__(self, group_id: str, topics: list):
        self._group_id = group_id
        self._topics = topics

    def build(self, request_struct_class: type[OffsetDeleteRequestStruct]):
        """Instantiate the chosen version's struct with this request's fields."""
        return request_struct_class(self._group_id, self._topics)


# --- coordinator requests ----------------------------------------------------------------------

# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: find the coordinator
# again and retry (e.g. while __consumer_offsets is still being created on a fresh cluster).
_COORDINATOR_RETRY_CODES = COORDINATOR_CODES
_COORDINATOR_TIMEOUT_S = 30.0


def _error_codes(response) -> set[int]:
    codes = {getattr(response, "error_code", 0)}
    for _topic, partitions in response.topics:
        codes.update(partition[-1] for partition in partitions)  # the error code comes last in each
    return codes


async def _find_coordinator(admin: AIOKafkaAdminClient, group: str) -> int:
    """``admin.find_coordinator(group)``, retried while the coordinator is not available yet."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _COORDINATOR_TIMEOUT_S
    while True:
        try:
            return await admin.find_coordinator(group)
        except KafkaError as exc:
            if not getattr(exc, "retriable", False) or loop.time() > deadline:
                raise
        await asyncio.sleep(0.2)


async def _send_to_group_coordinator(admin: AIOKafkaAdminClient, group: str, request: Request,
                                     coordinators: dict[str, int] | None = None):
    """Send ``request`` to ``group``'s coordinator, retrying while the coordinator moves or loads.

    ``coordinators`` (group -> node id) remembers where each group's coordinator was found, so a
    call repeated every cycle costs one request, not two; an answer or error saying the
    coordinator moved drops the entry and it is looked up again.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _COORDINATOR_TIMEOUT_S
    while True:
        coordinator = None if coordinators is None else coordinators.get(group)
        try:
            if coordinator is None:
                coordinator = await _find_coordinator(admin, group)
                if coordinators is not None:
                    coordinators[group] = coordinator
            response = await admin._send_request(request, coordinator)
        except KafkaError as exc:
            if coordinators is not None:
                coordinators.pop(group, None)
            if not getattr(exc, "retriable", False) or loop.time() > deadline:
                raise
        else:
            if not (_error_codes(response) & _COORDINATOR_RETRY_CODES):
                return response
            if coordinators is not None:
                coordinators.pop(group, None)
            if loop.time() > deadline:
                return response
        await asyncio.sleep(0.2)


# --- public functions -------------------------------------------------------------------------

# InitProducerId errors a fencing retries: COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS
# (the previous transaction is still completing) after a pause, and COORDINATOR_NOT_AVAILABLE /
# NOT_COORDINATOR after finding the coordinator again (as Kafka's FenceProducersHandler does).
_FENCE_RETRY_CODES = {14, 51}
_FENCE_RELOOKUP_CODES = {15, 16}
_TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
_CLUSTER_AUTHORIZATION_FAILED = 31


class FencingError(ContractKafkaError):
    """A transactional id could not be fenced; the message names the id and the cause."""


async def fence_producers(admin: AIOKafkaAdminClient, transactional_ids: Iterable[str], *,
                          timeout_ms: int = 60_000) -> None:
    """Fence every producer using one of ``transactional_ids`` (Kafka's ``Admin.fenceProducers``, KIP-730).

    For each id: find its transaction coordinator, then send InitProducerId with the id and no
    producer id/epoch. The coordinator bumps the id's epoch and aborts its open transaction; a
    producer still holding an older epoch gets PRODUCER_FENCED on its next write, so not one
    more record of it is committed. ``timeout_ms`` bounds the whole call and is the transaction
    timeout the coordinator records for the id (as the Java admin does). Ids are fenced one after
    another. Raises :class:`FencingError` naming the id (and the ACL it needs when authorization
    failed), or TimeoutError.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    for transactional_id in transactional_ids:
        while True:
            if loop.time() > deadline:
                raise TimeoutError(f"fencing transactional id {transactional_id!r} did not complete within "
                                   f"{timeout_ms} ms (is the transaction coordinator available?)")
            try:
                async with asyncio.timeout(max(deadline - loop.time(), 0.001)):
                    node = await admin._client.coordinator_lookup(CoordinationType.TRANSACTION, transactional_id)
                async with asyncio.timeout(max(deadline - loop.time(), 0.001)):
                    response = await admin._client.send(node, InitProducerIdRequest(transactional_id, timeout_ms))
            except TransactionalIdAuthorizationFailed:
                raise FencingError(_authorization_message(transactional_id, "FindCoordinator")) from None
            except (KafkaError, asyncio.TimeoutError) as exc:
                if isinstance(exc, KafkaError) and not getattr(exc, "retriable", False):
                    raise FencingError(f"fencing transactional id {transactional_id!r} failed: {exc!r}") from exc
                await asyncio.sleep(0.1)
                continue
            code = response.error_code
            if code == 0:
                break
            if code in _FENCE_RETRY_CODES or code in _FENCE_RELOOKUP_CODES:
                await asyncio.sleep(0.05 if code == 51 else 0.1)
                continue
            if code == _TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                raise FencingError(_authorization_message(transactional_id, "InitProducerId"))
            if code == _CLUSTER_AUTHORIZATION_FAILED:
                raise FencingError(f"InitProducerId request for transactionalId `{transactional_id}` failed due "
                                   f"to cluster authorization failure: the principal needs IdempotentWrite on the "
                                   f"cluster")
            error = for_code(code)
            raise FencingError(f"InitProducerId request for transactionalId `{transactional_id}` failed due to "
                               f"unexpected error {error.__name__} ({code})")


def _authorization_message(transactional_id: str, request: str) -> str:
    return (f"{request} request for transactionalId `{transactional_id}` failed due to transactional ID "
            f"authorization failure: the principal needs WRITE (and DESCRIBE) on TransactionalId "
            f"{transactional_id!r} (kafka-acls --add --allow-principal User:... --operation Write "
            f"--transactional-id {transactional_id})")


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[TopicPartition]]:
    grouped: dict[str, list[TopicPartition]] = defaultdict(list)
    for tp in partitions:
        grouped[tp.topic].append(tp)
    return grouped


async def incremental_alter_configs(admin: AIOKafkaAdminClient, topic: str, set_configs: Mapping[str, str],
                                    delete_configs: Iterable[str] = ()) -> None:
    """Set and/or delete configs of ``topic`` without touching any other config.

    Sends IncrementalAlterConfigs v0 (API key 44): each key of ``set_configs`` gets a SET
    operation, each name in ``delete_configs`` a DELETE (the config falls back to its
    broker/default value). Unlike aiokafka's ``alter_configs`` (legacy AlterConfigs), configs not
    named here keep their current values.

    Raises the aiokafka error class for the broker's error code (e.g.
    ``UnknownTopicOrPartitionError``, ``InvalidConfigurationError``) with the broker's message.
    """
    ops = [(name, OP_SET, str(value)) for name, value in set_configs.items()]
    ops += [(name, OP_DELETE, None) for name in delete_configs]
    if not ops:
        return
    request = IncrementalAlterConfigsRequest([(RESOURCE_TOPIC, topic, ops)])
    response = await admin._send_request(request)
    for error_code, error_message, _type, name in response.responses:
        if error_code:
            raise for_code(error_code)(f"incremental alter configs of topic {name!r} failed: "
                                       f"{error_message or 'no message'}")


async def list_consumer_group_offsets(admin: AIOKafkaAdminClient, group: str,
                                      partitions: Iterable[TopicPartition] | None = None,
                                      coordinators: dict[str, int] | None = None
                                      ) -> dict[TopicPartition, tuple[int, str]]:
    """The committed offsets of ``group`` (of ``partitions``, or all), as ``(offset, metadata)``.

    An OffsetFetch (v2/v3, as negotiated) sent to the group's coordinator, looked up once and
    remembered in ``coordinators``. Unlike aiokafka's ``list_consumer_group_offsets``, the
    group-level error code is read: a coordinator that moved or is loading is asked again
    (aiokafka returned no offsets at all, as if the group had none), other errors are raised.
    """
    wanted = None if partitions is None else [(topic, [tp.partition for tp in tps])
                                              for topic, tps in _by_topic(partitions).items()]
    response = await _send_to_group_coordinator(admin, group, OffsetFetchRequest(group, wanted), coordinators)
    error_code = getattr(response, "error_code", 0)
    if error_code:
        raise for_code(error_code)(f"reading the committed offsets of group {group!r} failed")
    found = {}
    for topic, answered in response.topics:
        for partition, offset, metadata, error_code in answered:
            if error_code:
                raise for_code(error_code)(f"reading the committed offset of group {group!r} "
                                           f"for {topic}-{partition} failed")
            found[TopicPartition(topic, partition)] = (offset, metadata)
    return found


async def alter_consumer_group_offsets(admin: AIOKafkaAdminClient, group: str,
                                       offsets: Mapping[TopicPartition, int | tuple[int, str]]) -> None:
    """Set committed offsets of ``group`` as an administrator would (MM2's checkpoint sync).

    ``offsets`` maps each partition to an offset or an ``(offset, metadata)`` pair. Sends an
    OffsetCommit (v2/v3, as negotiated) with generation ``-1`` and an empty member id to the
    group's coordinator; the group is created (state "Empty") if it does not exist.

    Raises :class:`GroupNotEmptyError` if the group has active members (the broker answers
    UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION), otherwise the aiokafka error
    class for the first partition error.
    """
    if not offsets:
        return
    topics = []
    for topic, tps in _by_topic(offsets).items():
        parts = []
        for tp in tps:
            value = offsets[tp]
            offset, metadata = (value, "") if isinstance(value, int) else value
            parts.append((tp.partition, int(offset), metadata))
        topics.append((topic, parts))
    request = OffsetCommitRequest(group, OffsetCommitRequest.DEFAULT_GENERATION_ID, "",
                                  OffsetCommitRequest.DEFAULT_RETENTION_TIME, topics)
    response = await _send_to_group_coordinator(admin, group, request)
    _raise_partition_errors(group, "altering offsets", response.topics)


async def delete_consumer_group_offsets(admin: AIOKafkaAdminClient, group: str,
                                        partitions: Iterable[TopicPartition]) -> None:
    """Delete the committed offsets of ``group`` for ``partitions`` (OffsetDelete v0, key 47).

    The group must not be subscribed to those topics by an active member: in that case the
    broker answers GROUP_SUBSCRIBED_TO_TOPIC and :class:`GroupNotEmptyError` is raised. A missing
    group raises aiokafka's ``GroupIdNotFound``; other errors the matching aiokafka error class.
    """
    topics = [(topic, [tp.partition for tp in tps]) for topic, tps in _by_topic(partitions).items()]
    if not topics:
        return
    response = await _send_to_group_coordinator(admin, group, OffsetDeleteRequest(group, topics))
    if response.error_code:
        if response.error_code in _GROUP_ACTIVE_CODES:
            raise _group_not_empty(group, response.error_code, "deleting offsets")
        raise for_code(response.error_code)(f"deleting offsets of group {group!r} failed")
    _raise_partition_errors(group, "deleting offsets", response.topics)


def _raise_partition_errors(group: str, what: str, topics) -> None:
    for topic, partitions in topics:
        for partition, error_code in partitions:
            if not error_code:
                continue
            if error_code in _GROUP_ACTIVE_CODES:
                raise _group_not_empty(group, error_code, f"{what} of {topic}-{partition}")
            raise for_code(error_code)(f"{what} of group {group!r} failed for {topic}-{partition}")


#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: ask again shortly.
_COORDINATOR_MOVED = COORDINATOR_CODES
_COORDINATOR_ATTEMPTS = 5


async def describe_consumer_group_state(admin: AIOKafkaAdminClient, group: str) -> str:
    """The state of consumer group ``group`` as the broker names it.

    One of "Empty", "Stable", "PreparingRebalance", "CompletingRebalance" or "Dead" (a group
    that does not exist is reported as "Dead"). Raises the aiokafka error class if the broker
    returns an error for the group.
    """
    for attempt in range(_COORDINATOR_ATTEMPTS):
        coordinator = await _find_coordinator(admin, group)
        responses = await admin.describe_consumer_groups([group], group_coordinator_id=coordinator)
        entries = [entry for response in responses for entry in response.groups if entry[1] == group]
        if not entries:
            break
        error_code, state = entries[0][0], entries[0][2]
        if error_code in _COORDINATOR_MOVED and attempt + 1 < _COORDINATOR_ATTEMPTS:
            await asyncio.sleep(0.2 * (attempt + 1))  # the coordinator moved or is loading: find it again
            continue
        if error_code:
            raise for_code(error_code)(f"describing group {group!r} failed")
        return state
    raise ValueError(f"the broker did not describe group {group!r}")



# --- ACLs (DescribeAcls key 29, CreateAcls key 30) ---------------------------------------------


def _enum(kind: type[IntEnum], code: int) -> IntEnum | int:
    try:
        return kind(code)
    except ValueError:  # a code newer than this module: keep the number
        return code


async def describe_acls(admin: AIOKafkaAdminClient, acl_filter: AclFilter = AclFilter(),
                        node_id: int | None = None) -> list[AclBinding]:
    """The ACLs ``acl_filter`` matches, as the broker ``node_id`` (default: any) knows them now.

    Needs DESCRIBE on the cluster. Raises ``ClusterAuthorizationFailedError`` without it,
    ``SecurityDisabled`` when the cluster runs no authorizer, or the aiokafka error class for
    another error code, with the broker's message.
    """
    request = DescribeAclsRequest(int(acl_filter.resource_type), acl_filter.resource_name,
                                  int(acl_filter.pattern_type), acl_filter.principal, acl_filter.host,
                                  int(acl_filter.operation), int(acl_filter.permission_type))
    response = await admin._send_request(request, node_id)
    if response.error_code:
        raise for_code(response.error_code)(f"describing ACLs failed: {response.error_message or 'no message'}")
    bindings = []
    for resource in response.resources:
        resource_type, resource_name, *pattern, acls = resource
        pattern_type = pattern[0] if pattern else PatternType.LITERAL  # v0 knew only literal names
        for principal, host, operation, permission_type in acls:
            bindings.append(AclBinding(_enum(ResourceType, resource_type), resource_name,
                                       _enum(PatternType, pattern_type), principal, host,
                                       _enum(AclOperation, operation), _enum(AclPermissionType, permission_type)))
    return bindings


async def create_acls(admin: AIOKafkaAdminClient, bindings: Iterable[AclBinding],
                      node_id: int | None = None) -> list[tuple[AclBinding, KafkaError]]:
    """Create ``bindings`` (an existing identical binding is left as it is); returns the failures.

    Needs ALTER on the cluster: without it ``ClusterAuthorizationFailedError`` is raised at the
    first binding (the others would fail alike). Any other refusal of one binding (e.g. an
    invalid resource name) is returned as ``(binding, error)`` and the remaining bindings are
    still sent. The broker forwards the change to the controller, so a broker may enforce it a
    moment after this returns.
    """
    failures: list[tuple[AclBinding, KafkaError]] = []
    for binding in bindings:  # aiokafka's request builder carries one creation per request
        request = CreateAclsRequest(int(binding.resource_type), binding.resource_name, int(binding.pattern_type),
                                    binding.principal, binding.host, int(binding.operation),
                                    int(binding.permission_type))
        response = await admin._send_request(request, node_id)
        for error_code, error_message in response.creation_responses:
            if not error_code:
                continue
            error = for_code(error_code)(f"creating ACL {binding} failed: {error_message or 'no message'}")
            if isinstance(error, ClusterAuthorizationFailedError):
                raise error
            failures.append((binding, error))
    return failures


async def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None,
                       timeout: float = 30.0) -> None:
    """Create a topic (replication factor 1); raise if the broker reports an error.

    Returns once the broker serves every partition with a leader: in KRaft the controller
    accepts the topic a moment before the broker knows it.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(name, partitions, 1, topic_configs={k: str(v) for k, v in (config or {}).items()})])
        for topic_error in response.topic_errors:
            if topic_error[1] != 0:
                raise RuntimeError(f"creating topic {name} failed: {topic_error}")
        deadline = asyncio.get_running_loop().time() + timeout
        while not any(entry["topic"] == name and entry["error_code"] == 0 and len(entry["partitions"]) == partitions
                      and all(p["leader"] >= 0 for p in entry["partitions"])
                      for entry in await admin.describe_topics()):
            if asyncio.get_running_loop().time() > deadline:
                raise RuntimeError(f"topic {name} has no leader for each of its {partitions} partitions "
                                   f"after {timeout:.0f}s")
            await asyncio.sleep(0.1)
    finally:
        await admin.close()
