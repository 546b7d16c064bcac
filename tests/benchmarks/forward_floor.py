"""A bare forwarding loop: the least CPU a Python mirror's fetch-and-produce round trip can cost.

Not a product path and not a mirror to deploy: a measuring instrument for issue 25's question
whether a forwarding loop of mirrorline's own (instead of aiokafka's fetcher and sender) could
copy a 1-MB/s trickle at MM2's p99 for less CPU. ``bench_latency.py --engines floor-gather-10``
runs it as an engine beside MM2 and mirrorline, on the same clusters, measured the same way.

Per task (a share of the topic's partitions, as ``tasks.max`` splits them), one coroutine does
only what every round trip must: a Fetch v11 in an incremental fetch session (KIP-227) that
waits up to ``--gather-ms`` for ``--min-bytes``, :func:`~mirrorline.clients.fetched_batches.split_fetched`
(CRC checks, control and aborted batches dropped) and :func:`~...coalesce` on each partition's
bytes, each batch's header rewritten for an idempotent producer by mirrorline's own
:class:`~mirrorline.clients.forwarded_batch.ForwardedBatch` (as its producer does), and one
Produce v7 (``acks=all``) per round, pipelined up to five in flight on one connection. The
codecs are mirrorline's compiled ones, on uvloop, as mirrorline runs.

``--producer mirrorline`` keeps the fetch loop but writes through mirrorline's own producer
(aiokafka's accumulator and sender, configured as the runtime configures a source task's): what a
rewrite of the fetch side alone would leave.

What it leaves out, so what mirrorline's real path adds on top of this floor: leader changes and
every retriable error (any error here stops the process with a non-zero exit, but for a
partition not writable yet while nothing else is in flight), more than one
broker per cluster, offset commits, offset syncs, metrics, the task and connector runtime.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import sys
import time
from collections import deque

import uvloop
from aiokafka.protocol import fetch, produce, transaction
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorline.clients.compiled_codecs import compile_decoder, compile_encoder
from mirrorline.clients.fetched_batches import coalesce, split_fetched
from mirrorline.clients.forwarded_batch import ForwardedBatch

FETCH_MAX_BYTES = 8 * 1024 * 1024
PARTITION_MAX_BYTES = 1024 * 1024
#: mirrorline's default batch.forwarding.coalesce.bytes
COALESCE_BYTES = 262144
PRODUCE_IN_FLIGHT = 5
#: UNKNOWN_TOPIC_OR_PARTITION and NOT_LEADER_OR_FOLLOWER: a target topic just made
RETRIABLE_PRODUCE = (3, 6)
_FRAME = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")
_CLIENT_ID = b"floor"


class Connection:
    """One broker connection: requests written in order, answers matched by correlation ID."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._reader, self._writer = reader, writer
        self._waiting: dict[int, asyncio.Future] = {}
        self._next_id = 0
        self._reading = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(cls, bootstrap: str) -> Connection:
        """A connection to ``host:port``."""
        host, _, port = bootstrap.rpartition(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    def send(self, api_key: int, version: int, body: bytes) -> asyncio.Future:
        """Write one request; the future gets the answer's frame, its body from offset 4 (after the
        response header v0)."""
        self._next_id += 1
        correlation = self._next_id
        header = _HEADER.pack(api_key, version, correlation, len(_CLIENT_ID)) + _CLIENT_ID
        self._writer.write(_FRAME.pack(len(header) + len(body)) + header + body)
        future = asyncio.get_running_loop().create_future()
        self._waiting[correlation] = future
        return future

    async def _read_loop(self) -> None:
        try:
            while True:
                size = _FRAME.unpack(await self._reader.readexactly(4))[0]
                frame = await self._reader.readexactly(size)
                future = self._waiting.pop(_FRAME.unpack_from(frame)[0])
                future.set_result(frame)
        except BaseException as exc:  # the connection is gone: every waiter learns it
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(ConnectionError(f"broker connection lost: {exc!r}"))
            raise


ENCODE_FETCH = compile_encoder(fetch.FetchRequest_v11.SCHEMA)
DECODE_FETCH = compile_decoder(fetch.FetchResponse_v11.SCHEMA)
ENCODE_PRODUCE = compile_encoder(produce.ProduceRequest_v7.SCHEMA)
DECODE_PRODUCE = compile_decoder(produce.ProduceResponse_v7.SCHEMA)


async def init_producer_id(target: Connection) -> tuple[int, int]:
    """An idempotent producer's ID and epoch from the target (InitProducerId v0, no transaction);
    retried for a minute while the broker's producer-ID manager is not ready (error 14 or 15)."""
    body = compile_encoder(transaction.InitProducerIdRequest_v0.SCHEMA)((None, 60000))
    decode = compile_decoder(transaction.InitProducerIdResponse_v0.SCHEMA)
    for _ in range(120):
        (_, error, producer_id, epoch), _ = decode(await target.send(22, 0, body), 4)
        if error not in (14, 15):
            break
        await asyncio.sleep(0.5)
    if error:
        raise RuntimeError(f"InitProducerId failed with error code {error}")
    return producer_id, epoch


class FetchSession:
    """One task's partitions read from offset 0 in an incremental fetch session (KIP-227): each
    fetch lists only the partitions whose position moved, as the session requires."""

    def __init__(self, connection: Connection, topic: str, partitions: list[int], gather_ms: int, min_bytes: int):
        self._connection, self._topic, self._partitions = connection, topic, partitions
        self._wait = (gather_ms, min_bytes)
        self._positions = dict.fromkeys(partitions, 0)
        self._changed = list(partitions)
        self._id = self._epoch = 0

    async def next(self) -> list[tuple[int, list]]:
        """Fetch once: (partition, batches to forward, coalesced) for each partition with records."""
        listed = [(p, -1, self._positions[p], -1, PARTITION_MAX_BYTES) for p in self._changed]
        request = (-1, *self._wait, FETCH_MAX_BYTES, 1, self._id, self._epoch,
                   [(self._topic, listed)] if listed else [], [], "")
        answer = await self._connection.send(1, 11, ENCODE_FETCH(request))
        (_, error, answered_session, topics), _ = DECODE_FETCH(answer, 4)
        if error:
            raise RuntimeError(f"Fetch failed with error code {error} (session {self._id}/{self._epoch})")
        if self._epoch == 0:
            self._id = answered_session
        if self._id:
            self._epoch = self._epoch + 1 if self._epoch < 2 ** 31 - 1 else 1
            self._changed = []
        else:  # the broker keeps no session for us: every fetch lists every partition
            self._changed = list(self._partitions)
        fetched = []
        for _, answered in topics:
            for partition, p_error, _, _, _, aborted, _, records in answered:
                if p_error:
                    raise RuntimeError(f"Fetch of {self._topic}-{partition} failed with error code {p_error}")
                if not records:
                    continue
                split = split_fetched(records, self._positions[partition], aborted)
                if split.next_offset != self._positions[partition]:
                    self._positions[partition] = split.next_offset
                    if self._id:
                        self._changed.append(partition)
                if split.batches:
                    fetched.append((partition, coalesce(split.batches, COALESCE_BYTES)))
        return fetched


async def forward(source: str, target: str, topic: str, remote: str, partitions: list[int],
                  gather_ms: int, min_bytes: int, writer=None) -> None:
    """Copy ``partitions`` of ``topic`` on ``source`` to ``remote`` on ``target`` from offset 0, forever;
    through ``writer`` (a started mirrorline producer) when given, else with Produce requests of its own."""
    session = FetchSession(await Connection.open(source), topic, partitions, gather_ms, min_bytes)
    if writer is not None:
        await forward_through(session, writer, remote)
        return
    producer = await Connection.open(target)
    producer_id, epoch = await init_producer_id(producer)
    sequences = dict.fromkeys(partitions, 0)
    in_flight: deque[tuple[asyncio.Future, bytes]] = deque()  # (answer, request body), oldest first
    waiting: dict[int, deque] = {}  # partition -> batches after the one each produce request takes
    while True:
        for partition, batches in await session.next():
            waiting.setdefault(partition, deque()).extend(batches)
        while waiting:  # one batch per partition per request: the broker takes no more
            data = []
            for partition in list(waiting):
                queue = waiting[partition]
                batch = queue.popleft()
                if not queue:
                    del waiting[partition]
                # the header work mirrorline's producer does: base offset 0, foreign attributes
                # cleared, producer fields set (the builder calls aiokafka's sender makes), CRC-32C
                forwarded = ForwardedBatch(batch.data, batch.record_count)
                forwarded._set_producer_state(producer_id, epoch, sequences[partition])
                sequences[partition] = (sequences[partition] + batch.record_count) % 2 ** 31
                data.append((partition, forwarded._build()))
            while len(in_flight) >= PRODUCE_IN_FLIGHT:
                await settle(producer, in_flight)
            body = ENCODE_PRODUCE((None, -1, 30000, [(remote, data)]))
            in_flight.append((producer.send(0, 7, body), body))
        while in_flight and in_flight[0][0].done():
            await settle(producer, in_flight)


async def forward_through(session: FetchSession, writer, remote: str) -> None:
    """The fetch loop of :func:`forward`, each batch handed to mirrorline's producer
    (``send_record_batch``, as the runtime hands a task's batches), acknowledgements checked as they come."""
    acks: deque[asyncio.Future] = deque()
    while True:
        for partition, batches in await session.next():
            for batch in batches:
                acks.append(await writer.send_record_batch(remote, partition, batch.data, batch.record_count))
        while acks and (acks[0].done() or len(acks) > 1000):
            await acks.popleft()  # raises the write's error, if any


async def settle(producer: Connection, in_flight: deque) -> None:
    """Wait for the oldest Produce in flight and raise on any partition error; a partition that is
    not writable yet (error 3 or 6, as right after the target topic was made) is written again
    while nothing else is in flight, so its sequence numbers stay in order."""
    for _ in range(100):
        answer, body = in_flight[0]
        error = produced_error(await answer)
        if error is None:
            in_flight.popleft()
            return
        if error[2] not in RETRIABLE_PRODUCE or len(in_flight) > 1:
            raise RuntimeError(f"Produce to {error[0]}-{error[1]} failed with error code {error[2]}")
        await asyncio.sleep(0.1)
        in_flight[0] = (producer.send(0, 7, body), body)
    raise RuntimeError(f"Produce to {error[0]}-{error[1]} kept failing with error code {error[2]}")


def produced_error(answer: bytes) -> tuple[str, int, int] | None:
    """The first (topic, partition, error code) a Produce v7 answer reports, or None."""
    (topics, _), _ = DECODE_PRODUCE(answer, 4)
    for topic, answered in topics:
        for partition, error, *_ in answered:
            if error:
                return topic, partition, error
    return None


def prepare(source: str, target: str, topic: str, remote: str) -> int:
    """Create ``remote`` on the target with the source topic's partition count; that count."""
    admin = AdminClient({"bootstrap.servers": source})
    count = len(admin.list_topics(topic, timeout=30).topics[topic].partitions)
    target_admin = AdminClient({"bootstrap.servers": target})  # held: its futures fail once it is collected
    futures = target_admin.create_topics([NewTopic(remote, count, 1)])
    try:
        futures[remote].result(30)
    except Exception as exc:  # an earlier run's topic: fine, its partition count is the same
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise
    for _ in range(300):  # until every partition has a leader
        described = target_admin.list_topics(remote, timeout=30).topics[remote]
        if described.error is None and len(described.partitions) == count and \
                all(p.leader >= 0 for p in described.partitions.values()):
            return count
        time.sleep(0.1)
    raise RuntimeError(f"{remote} on {target} has partitions without a leader 30 s after it was made")


async def main(args, count: int) -> None:
    """Run ``--tasks`` forwarding loops over the topic's ``count`` partitions until one fails."""
    shares = [list(range(count))[i::args.tasks] for i in range(args.tasks)]
    writers = [None] * len(shares)
    if args.producer == "mirrorline":  # one per loop, as each task of the runtime has its own
        from mirrorline.clients import process_patches
        from mirrorline.clients.producer import KafkaProducer
        from mirrorline.runtime.worker_task import PRODUCE_LANES
        process_patches.install()
        writers = [KafkaProducer({"bootstrap_servers": args.target, "acks": "all", "enable_idempotence": True,
                                  "linger_ms": 5, "max_batch_size": 512 * 1024, "produce_lanes": PRODUCE_LANES})
                   for _ in shares]
        for writer in writers:
            await writer.start()
    loops = [asyncio.create_task(forward(args.source, args.target, args.topic, args.remote, share,
                                         args.gather_ms, args.min_bytes, writer))
             for share, writer in zip(shares, writers) if share]
    print(f"floor: forwarding {args.topic} -> {args.remote} with {len(loops)} loops, gather {args.gather_ms} ms, "
          f"min bytes {args.min_bytes}, {args.producer} producer", flush=True)
    done, _ = await asyncio.wait(loops, return_when=asyncio.FIRST_EXCEPTION)
    for task in done:
        task.result()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="the source cluster's one broker, host:port")
    parser.add_argument("--target", required=True, help="the target cluster's one broker, host:port")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--remote", required=True, help="the topic to write on the target")
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--gather-ms", type=int, default=10, help="the fetch's max wait")
    parser.add_argument("--min-bytes", type=int, default=1024 * 1024,
                        help="the fetch's min bytes (1: answer at the first record, as MM2's consumer)")
    parser.add_argument("--producer", choices=("own", "mirrorline"), default="own",
                        help="own: Produce requests of this loop's own; mirrorline: mirrorline's producer")
    arguments = parser.parse_args()
    try:
        # the admin calls block: made before the event loop runs
        uvloop.run(main(arguments, prepare(arguments.source, arguments.target, arguments.topic, arguments.remote)))
    except KeyboardInterrupt:
        sys.exit(130)
