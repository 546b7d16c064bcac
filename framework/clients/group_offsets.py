"""The committed offsets of many consumer groups in a few requests (KIP-699, KIP-709).

A checkpoint cycle reads every group's committed offsets once a minute. One OffsetFetch per
group (aiokafka's only form) is hundreds of requests a minute at hundreds of groups, plus a
FindCoordinator each unless coordinators are remembered. Since Kafka 3.0 both requests take
many groups: FindCoordinator **v4** looks up many keys at once, OffsetFetch **v8** asks one
coordinator about all its groups. Both are flexible versions (compact strings and arrays,
tagged fields), defined here with aiokafka's protocol building blocks as :mod:`.topic_ids`
defines Metadata v12; the OffsetFetch answer, thousands of partitions every checkpoint cycle,
is read by hand (:class:`OffsetFetchResponseV8`), the schema kept as the reference it is tested
against.

:func:`fetch_group_offsets` remembers each group's coordinator in a dict the caller keeps; an
answer saying a coordinator moved (or is loading) drops the entry, and that group is asked
again next time. A broker older than 3.0 answers neither version: the caller falls back to one
request per group (:class:`BatchedUnsupported`).
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable
from io import BytesIO
from typing import Any, NamedTuple

from aiokafka.errors import IncompatibleBrokerVersion, KafkaError, for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (Boolean, CompactArray, CompactString, Int8, Int16, Int32, Int64, Schema,
                                     TaggedFields)

from mirrorline.clients.flexible_bytes import FlexibleReader

_FIND_COORDINATOR = 10
_OFFSET_FETCH = 9
#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
COORDINATOR_CODES = frozenset({14, 15, 16})
#: partition_index, committed_offset, committed_leader_epoch: the fixed head of a partition's entry
_PARTITION_HEAD = struct.Struct(">iqi")
#: groups asked about per OffsetFetch (the answer holds every committed partition of each)
GROUPS_PER_REQUEST = 200


class BatchedUnsupported(Exception):
    """The broker has no FindCoordinator v4 or OffsetFetch v8 (Kafka before 3.0)."""


class FindCoordinatorResponse_v4(Response):
    """FindCoordinator v4 response: a coordinator (or an error) per key."""

    API_KEY = _FIND_COORDINATOR
    API_VERSION = 4
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("coordinators", CompactArray(
            ("key", CompactString("utf-8")), ("node_id", Int32), ("host", CompactString("utf-8")),
            ("port", Int32), ("error_code", Int16), ("error_message", CompactString("utf-8")),
            ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class FindCoordinatorRequest_v4(RequestStruct):
    """FindCoordinator v4 request: the coordinators of many keys of one type (0: groups)."""

    FLEXIBLE_VERSION = True
    API_KEY = _FIND_COORDINATOR
    API_VERSION = 4
    RESPONSE_TYPE = FindCoordinatorResponse_v4
    SCHEMA = Schema(
        ("key_type", Int8),
        ("coordinator_keys", CompactArray(CompactString("utf-8"))),
        ("tags", TaggedFields),
    )


class FindGroupCoordinators(Request[FindCoordinatorRequest_v4]):
    """The coordinators of ``groups``, in one request."""

    API_KEY = _FIND_COORDINATOR

    def __init__(self, groups: list[str]):
        self._groups = groups

    def build(self, request_struct_class: type[FindCoordinatorRequest_v4]) -> FindCoordinatorRequest_v4:
        """Instantiate the chosen version's struct with this request's fields."""
        return request_struct_class(0, self._groups, {})


class OffsetFetchResponse_v8(Response):
    """OffsetFetch v8 response as a schema: per group, its committed offsets and its error code.

    Answers are read by :class:`OffsetFetchResponseV8`; this stays to write answers in tests and
    to check that decoder against."""

    API_KEY = _OFFSET_FETCH
    API_VERSION = 8
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("groups", CompactArray(
            ("group_id", CompactString("utf-8")),
            ("topics", CompactArray(
                ("name", CompactString("utf-8")),
                ("partitions", CompactArray(
                    ("partition_index", Int32), ("committed_offset", Int64), ("committed_leader_epoch", Int32),
                    ("metadata", CompactString("utf-8")), ("error_code", Int16), ("tags", TaggedFields))),
                ("tags", TaggedFields))),
            ("error_code", Int16),
            ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class _OffsetFetchAnswer(NamedTuple):
    """A decoded OffsetFetch v8 answer, laid out as aiokafka's schema decoder lays it out."""

    throttle_time_ms: int
    groups: list
    tags: dict


class OffsetFetchResponseV8:
    """aiokafka response type for OffsetFetch v8 whose ``decode`` reads the bytes by hand.

    A checkpoint cycle asks for every group's committed offsets each minute; aiokafka's schema
    walker spent a Python call per field of each of thousands of partitions, about as much as the
    rest of an idle cycle. The layout is Kafka's ``OffsetFetchResponse.json`` at version 8: per
    group its id, topics (name, partitions: index, committed offset, leader epoch, metadata, error
    code) and error code, tagged fields skipped (shown as ``{}``).
    """

    API_KEY = _OFFSET_FETCH
    API_VERSION = 8

    @classmethod
    def decode(cls, data: BytesIO | bytes) -> _OffsetFetchAnswer:
        """Decode an OffsetFetch v8 response body (after the response header)."""
        raw = data if isinstance(data, bytes) else data.read()
        reader = FlexibleReader(raw)
        try:
            return _decode_offset_fetch(reader)
        except (IndexError, struct.error) as exc:
            raise ValueError(f"OffsetFetch v8 answer ends early or is malformed at byte {reader.pos}: {exc}") from exc


def _decode_offset_fetch(reader: FlexibleReader) -> _OffsetFetchAnswer:
    data = reader.data
    partition_head = _PARTITION_HEAD.unpack_from
    throttle = reader.int32()
    groups = []
    for _ in range(max(reader.uvarint() - 1, 0)):
        group_id = reader.compact_string()
        topics = None
        count = reader.uvarint() - 1
        if count >= 0:
            topics = []
            for _topic in range(count):
                name = reader.compact_string()
                partitions = []
                for _partition in range(max(reader.uvarint() - 1, 0)):
                    index, offset, epoch = partition_head(data, reader.pos)
                    reader.pos += 16
                    metadata = reader.compact_string()
                    error_code = reader.int16()
                    partitions.append((index, offset, epoch, metadata, error_code, reader.skip_tags()))
                topics.append((name, partitions, reader.skip_tags()))
        error_code = reader.int16()
        groups.append((group_id, topics, error_code, reader.skip_tags()))
    return _OffsetFetchAnswer(throttle, groups, reader.skip_tags())


class OffsetFetchRequest_v8(RequestStruct):
    """OffsetFetch v8 request: many groups, each with its topics (null: every committed one)."""

    FLEXIBLE_VERSION = True
    API_KEY = _OFFSET_FETCH
    API_VERSION = 8
    RESPONSE_TYPE = OffsetFetchResponseV8
    SCHEMA = Schema(
        ("groups", CompactArray(
            ("group_id", CompactString("utf-8")),
            ("topics", CompactArray(("name", CompactString("utf-8")), ("partition_indexes", CompactArray(Int32)),
                                    ("tags", TaggedFields))),
            ("tags", TaggedFields))),
        ("require_stable", Boolean),
        ("tags", TaggedFields),
    )


class FetchGroupsOffsets(Request[OffsetFetchRequest_v8]):
    """Every committed offset of each of ``groups`` (all coordinated by the broker it is sent to)."""

    API_KEY = _OFFSET_FETCH

    def __init__(self, groups: list[str]):
        self._groups = groups

    def build(self, request_struct_class: type[OffsetFetchRequest_v8]) -> OffsetFetchRequest_v8:
        """Instantiate the chosen version's struct with this request's fields."""
        return request_struct_class([(group, None, {}) for group in self._groups], False, {})


#: what one group's answer is: ``{(topic, partition): (offset, metadata)}``, or the error that stopped it
GroupAnswer = dict[tuple[str, int], tuple[int, str]] | Exception


async def fetch_group_offsets(admin: Any, groups: Iterable[str], coordinators: dict[str, int]
                              ) -> dict[str, GroupAnswer]:
    """The committed offsets of each of ``groups``, with one FindCoordinator for the groups whose
    coordinator is not remembered in ``coordinators`` and one OffsetFetch per coordinator (and
    :data:`GROUPS_PER_REQUEST` groups).

    ``admin`` is a started aiokafka admin client. A group whose coordinator cannot be found or
    answers with an error gets that error (an aiokafka ``KafkaError``) as its answer; the others
    are unaffected. Raises :class:`BatchedUnsupported` when the broker speaks neither v4 nor v8.
    """
    wanted = list(dict.fromkeys(groups))
    answers: dict[str, GroupAnswer] = {}
    unknown = [group for group in wanted if group not in coordinators]
    if unknown:
        answers.update(await _find_coordinators(admin, unknown, coordinators))
    by_node: dict[int, list[str]] = defaultdict(list)
    for group in wanted:
        if group not in answers:
            by_node[coordinators[group]].append(group)
    for node, node_groups in by_node.items():
        for start in range(0, len(node_groups), GROUPS_PER_REQUEST):
            chunk = node_groups[start:start + GROUPS_PER_REQUEST]
            try:
                response = await _send(admin, FetchGroupsOffsets(chunk), node)
            except KafkaError as exc:
                for group in chunk:
                    coordinators.pop(group, None)
                    answers[group] = exc
                continue
            answers.update(_read_offsets(response, chunk, coordinators))
    return answers


async def _find_coordinators(admin: Any, groups: list[str], coordinators: dict[str, int]) -> dict[str, Exception]:
    """Look up (and remember) the coordinators of ``groups``; returns the errors of those not found."""
    response = await _send(admin, FindGroupCoordinators(groups), None)
    failed: dict[str, Exception] = {}
    for key, node_id, _host, _port, error_code, error_message, _tags in response.coordinators:
        if error_code:
            failed[key] = for_code(error_code)(f"finding the coordinator of group {key!r}: "
                                               f"{error_message or 'no message'}")
        else:
            coordinators[key] = node_id
    for group in groups:  # a key the broker left out of its answer
        if group not in coordinators and group not in failed:
            failed[group] = KafkaError(f"the broker named no coordinator for group {group!r}")
    return failed


def _read_offsets(response, asked: list[str], coordinators: dict[str, int]) -> dict[str, GroupAnswer]:
    answers: dict[str, GroupAnswer] = {}
    for group_id, topics, error_code, _tags in response.groups:
        if error_code:
            if error_code in COORDINATOR_CODES:
                coordinators.pop(group_id, None)  # found again next time
            answers[group_id] = for_code(error_code)(f"reading the committed offsets of group {group_id!r}")
            continue
        found: dict[tuple[str, int], tuple[int, str]] = {}
        failure = None
        for name, partitions, _topic_tags in topics or ():
            for partition, offset, _epoch, metadata, partition_error, _partition_tags in partitions:
                if partition_error and failure is None:
                    failure = for_code(partition_error)(f"reading the committed offset of group {group_id!r} "
                                                        f"for {name}-{partition}")
                found[(name, partition)] = (offset, metadata or "")
        answers[group_id] = failure if failure is not None else found
    for group in asked:
        if group not in answers:
            answers[group] = KafkaError(f"the coordinator left group {group!r} out of its answer")
    return answers


async def _send(admin: Any, request: Request, node: int | None):
    try:
        if node is None:
            return await admin._send_request(request)
        return await admin._send_request(request, node)
    except (NotImplementedError, IncompatibleBrokerVersion) as exc:  # no version of ours the broker speaks
        raise BatchedUnsupported(str(exc)) from exc
