"""One request on an open aiokafka connection, without aiokafka's per-request wrapping.

``AIOKafkaClient.send`` looks the connection up in a coroutine of its own (``ready`` and
``_get_conn``), then awaits the connection's answer through ``aiokafka.util.wait_for``, which
makes, enters and leaves an ``async_timeout`` context per request. The two loops that make a
request per round trip, :mod:`.batch_fetcher` and :mod:`.batch_sender`, paid that on every
fetch and every produce: py-spy put the wrapping at 4-5 % of a 1-MB/s trickle's CPU
(docs/performance.md, *Cheaper round trips*). :func:`send_request` does what ``AIOKafkaClient.send``
does for a connection that is open, with one timer handle for the request timeout, and leaves every
other case (no connection yet, one being made, a request with no answer) to aiokafka.

What stays the same as aiokafka's: the request is built and framed by the connection's own
versions, correlation ids and client id, and written in one ``write``; its answer is matched and
decoded by the connection's read loop; a request unanswered within ``request.timeout.ms`` closes
the connection (so it is made again for the next request) and raises ``RequestTimedOutError``; a
connection that breaks fails the request with aiokafka's own error.

(This relies on ``AIOKafkaConnection``'s attributes, one reason aiokafka is pinned to a minor
version; ``tests/unit/clients/test_lean_send.py`` checks them.)
"""

from __future__ import annotations

import asyncio
import struct

from aiokafka.client import AIOKafkaClient, ConnectionGroup
from aiokafka.conn import CloseReason
from aiokafka.errors import KafkaConnectionError, RequestTimedOutError

__all__ = ["send_request"]

_SIZE = struct.Struct(">i")


class _Expired(Exception):
    """The request timeout passed with no answer (internal: raised as RequestTimedOutError)."""


def _expire(future: asyncio.Future) -> None:
    if not future.done():
        future.set_exception(_Expired())


async def send_request(client: AIOKafkaClient, node_id: int, request, group=ConnectionGroup.DEFAULT):
    """``await client.send(node_id, request, group=group)``, cheaper on an open connection (module docstring).

    Raises what ``AIOKafkaClient.send`` raises: ``NodeNotReadyError`` and the connection errors
    from aiokafka's path, ``RequestTimedOutError`` and ``KafkaConnectionError`` from this one."""
    conns = getattr(client, "_conns", None)  # None: a stand-in client, sent to as it is
    conn = None if conns is None else conns.get((node_id, group))
    if conn is None or conn._writer is None or not conn.connected() or getattr(request, "required_acks", 1) == 0:
        return await client.send(node_id, request, group=group)
    request_struct = request.prepare(conn._versions)
    correlation_id = conn._next_correlation_id()
    header = request_struct.build_request_header(correlation_id=correlation_id, client_id=conn._client_id)
    message = header.encode() + request_struct.encode()
    try:
        conn._writer.write(_SIZE.pack(len(message)) + message)
    except OSError as err:
        conn.close(reason=CloseReason.CONNECTION_BROKEN)
        raise KafkaConnectionError(f"Connection at {conn._host}:{conn._port} broken: {err}") from err
    loop = conn._loop
    future = loop.create_future()
    conn._requests.append((correlation_id, request_struct, future))
    timer = loop.call_at(loop.time() + conn._request_timeout, _expire, future)
    try:
        return await future
    except _Expired:
        conn.close(reason=CloseReason.CONNECTION_TIMEOUT)  # made again for the next request, as aiokafka does
        raise RequestTimedOutError() from None
    finally:
        timer.cancel()
