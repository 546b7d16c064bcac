"""A request on an open connection without aiokafka's per-request wrapping (mirrorline.clients.lean_send).

The connection is aiokafka's own, with its stream writer replaced by one that keeps what is
written and its answers handed to its own ``_handle_frame``: what these tests check is that
``send_request`` frames, matches and times out requests as ``AIOKafkaClient.send`` does.
Integration tests (test_batch_fetcher.py, test_batch_sender.py, the mirror tests) send every
fetch and produce of the forwarding path through it against real brokers."""

from __future__ import annotations

import asyncio
import inspect
import struct

import pytest
from aiokafka.client import AIOKafkaClient, ConnectionGroup
from aiokafka.conn import AIOKafkaConnection, CloseReason
from aiokafka.errors import KafkaConnectionError, RequestTimedOutError
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.protocol.produce import ProduceRequest

from mirrorline.clients.lean_send import send_request

_METADATA = 3


class _Writer:
    """What the connection writes: every frame, or an error on write when ``broken``."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.broken = False

    def write(self, data: bytes) -> None:
        if self.broken:
            raise OSError("Broken pipe")
        self.frames.append(data)


class _Client:
    """A client holding one open connection to node 1, counting what goes by aiokafka's own path."""

    def __init__(self, conn: AIOKafkaConnection | None) -> None:
        self._conns = {} if conn is None else {(1, ConnectionGroup.DEFAULT): conn}
        self.sent_by_aiokafka: list = []

    async def send(self, node_id, request, *, group=ConnectionGroup.DEFAULT):
        self.sent_by_aiokafka.append((node_id, request, group))
        return "aiokafka's answer"


def _open_connection(timeout_s: float = 30.0) -> tuple[AIOKafkaConnection, _Writer, list]:
    conn = AIOKafkaConnection("localhost", 9092, client_id="lean-test", request_timeout_ms=int(timeout_s * 1000))
    writer = _Writer()
    closed: list = []
    conn._writer = writer
    conn._reader = asyncio.StreamReader()
    conn._versions = {_METADATA: (0, 0)}
    conn.close = lambda reason=None, exc=None: closed.append(reason)
    return conn, writer, closed


def _empty_metadata_answer(correlation_id: int) -> bytes:
    """A Metadata v0 response frame (no brokers, no topics) for ``correlation_id``, without its size."""
    return struct.pack(">iii", correlation_id, 0, 0)


async def test_a_request_is_framed_by_the_connection_and_answered_through_its_read_loop():
    conn, writer, closed = _open_connection()
    sending = asyncio.ensure_future(send_request(_Client(conn), 1, MetadataRequest([])))
    await asyncio.sleep(0)
    (frame,) = writer.frames
    (size,) = struct.unpack(">i", frame[:4])
    assert size == len(frame) - 4
    api_key, version, correlation_id = struct.unpack(">hhi", frame[4:12])
    assert (api_key, version) == (_METADATA, 0)
    client_id_length = struct.unpack(">h", frame[12:14])[0]
    assert frame[14:14 + client_id_length] == b"lean-test"
    assert len(conn._requests) == 1 and conn._requests[0][0] == correlation_id
    conn._handle_frame(_empty_metadata_answer(correlation_id))
    answer = await sending
    assert (answer.brokers, answer.topics) == ([], [])
    assert not conn._requests and not closed


async def test_an_unanswered_request_times_out_closes_the_connection_and_a_late_answer_is_dropped():
    conn, writer, closed = _open_connection(timeout_s=0.05)
    with pytest.raises(RequestTimedOutError):
        await send_request(_Client(conn), 1, MetadataRequest([]))
    assert closed == [CloseReason.CONNECTION_TIMEOUT]
    (correlation_id, _struct, future) = conn._requests[0]
    conn._handle_frame(_empty_metadata_answer(correlation_id))  # answered after all: nothing to resolve
    assert not conn._requests and future.done()


async def test_a_write_that_fails_closes_the_connection_as_broken():
    conn, writer, closed = _open_connection()
    writer.broken = True
    with pytest.raises(KafkaConnectionError, match="broken"):
        await send_request(_Client(conn), 1, MetadataRequest([]))
    assert closed == [CloseReason.CONNECTION_BROKEN] and not conn._requests


async def test_a_cancelled_request_leaves_the_answer_to_be_dropped():
    conn, writer, closed = _open_connection()
    sending = asyncio.ensure_future(send_request(_Client(conn), 1, MetadataRequest([])))
    await asyncio.sleep(0)
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending
    correlation_id = conn._requests[0][0]
    conn._handle_frame(_empty_metadata_answer(correlation_id))
    assert not conn._requests and not closed


@pytest.mark.parametrize("case", ["no connection", "closed connection", "acks=0", "other group"])
async def test_what_is_not_an_answered_request_on_an_open_connection_goes_through_aiokafka(case):
    conn, writer, _closed = _open_connection()
    request = MetadataRequest([])
    group = ConnectionGroup.DEFAULT
    if case == "closed connection":
        conn._reader.feed_eof()
    elif case == "acks=0":
        request = ProduceRequest(required_acks=0, timeout=1000, topics=[], transactional_id=None)
    elif case == "other group":
        group = ("produce-lane", 1)
    client = _Client(None if case == "no connection" else conn)
    assert await send_request(client, 1, request, group) == "aiokafka's answer"
    assert client.sent_by_aiokafka == [(1, request, group)] and not writer.frames


async def test_a_stand_in_client_without_connections_is_sent_to_as_it_is():
    class StandIn:
        async def send(self, node_id, request, **kwargs):
            return ("sent", node_id, kwargs)

    assert await send_request(StandIn(), 4, MetadataRequest([])) == ("sent", 4, {"group": ConnectionGroup.DEFAULT})


def test_aiokafkas_send_still_does_what_send_request_repeats():
    """send_request repeats AIOKafkaConnection.send's steps and AIOKafkaClient.send's timeout handling:
    a new aiokafka that changes them must be looked at before it is used."""
    conn_send = inspect.getsource(AIOKafkaConnection.send)
    for step in ("request.prepare(self._versions)", "self._next_correlation_id()", "build_request_header(",
                 "header.encode() + request_struct.encode()", 'struct.pack(">i", len(message))',
                 "self._writer.write(size + message)", "self._requests.append(",
                 "wait_for(fut, self._request_timeout)", "CloseReason.CONNECTION_BROKEN"):
        assert step in conn_send, step
    client_send = inspect.getsource(AIOKafkaClient.send)
    for step in ("await self.ready(node_id, group=group)", "request.required_acks == 0",
                 "close(reason=CloseReason.CONNECTION_TIMEOUT)", "raise RequestTimedOutError()"):
        assert step in client_send, step
    handle_frame = inspect.getsource(AIOKafkaConnection._handle_frame)
    assert "if not fut.done():" in handle_frame and "self._requests.popleft()" in handle_frame
