"""The wall's consumer builds a real aiokafka consumer whose fetch loop sleeps 10 s when
nothing wakes it, not 0.2 s (each wake-up walks every assigned partition); a user's own value still wins.

Built only, never started: no broker is needed to construct a consumer. Each is stopped after
(closing a never-started consumer needs no broker either), or aiokafka warns of it unclosed at exit.
"""

from __future__ import annotations

from mirrorline.clients.consumer import FETCH_LOOP_WAKEUP_MS, KafkaConsumer


async def test_the_fetch_loop_wakes_every_ten_seconds_when_nothing_happens():
    consumer = KafkaConsumer.from_settings({"bootstrap.servers": "127.0.0.1:9"})
    try:
        assert FETCH_LOOP_WAKEUP_MS == 10_000
        assert consumer._consumer._consumer_timeout == 10.0
    finally:
        await consumer.stop()


async def test_an_explicit_timeout_is_kept():
    consumer = KafkaConsumer({"bootstrap_servers": "127.0.0.1:9", "consumer_timeout_ms": 500})
    try:
        assert consumer._consumer._consumer_timeout == 0.5
    finally:
        await consumer.stop()
