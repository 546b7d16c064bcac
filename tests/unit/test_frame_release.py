"""Connections drop each response's bytes once handled (mirrorline.clients.frame_release)."""

import asyncio
import struct
import sys
import weakref

import pytest

from aiokafka.conn import AIOKafkaConnection

from mirrorline.clients import frame_release, kafka_clients


class _Connection:
    """What the read loop uses of a connection: its reader and ``_handle_frame``."""

    def __init__(self, reader: asyncio.StreamReader):
        self._reader = reader
        self.frames: list[bytes] = []
        self.handled = asyncio.Event()

    def _handle_frame(self, frame: bytes) -> None:
        self.frames.append(frame)
        self.handled.set()


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_configuring_a_client_installs_it_once():
    kafka_clients.client_kwargs({"bootstrap.servers": "localhost:9092"}, "consumer")
    assert frame_release.is_installed()
    frame_release.install()
    assert AIOKafkaConnection._read is frame_release._read


async def _refs_to_first_frame_while_waiting(read_loop) -> tuple[int, _Connection, asyncio.Task, asyncio.StreamReader]:
    """References to the first frame (besides the caller's) while ``read_loop`` waits for the second."""
    reader = asyncio.StreamReader()
    connection = _Connection(reader)
    loop_task = asyncio.create_task(read_loop(weakref.ref(connection)))
    reader.feed_data(_frame(b"x" * 100_000) + _frame(b"second")[:3])  # the next frame only begun
    await asyncio.wait_for(connection.handled.wait(), 5)
    await asyncio.sleep(0.01)  # the loop now waits for the rest of the second frame
    # minus the list's reference and getrefcount's argument
    return sys.getrefcount(connection.frames[0]) - 2, connection, loop_task, reader


async def test_each_frame_is_handled_in_order_and_not_held_by_the_loop():
    held, connection, loop_task, reader = await _refs_to_first_frame_while_waiting(frame_release._read)
    assert held == 0
    connection.handled.clear()
    reader.feed_data(_frame(b"second")[3:])
    await asyncio.wait_for(connection.handled.wait(), 5)
    assert connection.frames == [b"x" * 100_000, b"second"]
    loop_task.cancel()


async def test_aiokafkas_own_loop_holds_the_last_frame():
    """Why the replacement exists; if aiokafka stops holding it, frame_release can go."""
    original = getattr(frame_release, "_ORIGINAL_READ", None) or AIOKafkaConnection._read
    if original is frame_release._read:
        pytest.skip("aiokafka's original loop is not kept")
    held, _connection, loop_task, _reader = await _refs_to_first_frame_while_waiting(original)
    assert held == 1
    loop_task.cancel()


async def test_the_loop_ends_when_its_connection_is_gone():
    reader = asyncio.StreamReader()
    connection = _Connection(reader)
    loop_task = asyncio.create_task(frame_release._read(weakref.ref(connection)))
    await asyncio.sleep(0)
    del connection
    reader.feed_data(_frame(b"late"))
    await asyncio.wait_for(loop_task, 5)
    assert loop_task.result() is None
