"""Encoding and decoding the hot messages: aiokafka's schema walk against the compiled codecs.

No broker: each message is built as a mirror at a trickle sends and receives it (one topic,
``--partitions`` partitions of one 1,100-byte record batch each), then encoded or decoded
``--number`` times each way in this process. Prints microseconds per message and the ratio;
``--partitions`` takes a comma list (a full fetch at thousands of partitions is the session's
first request).

    .venv/bin/python tests/benchmarks/bench_codecs.py
    .venv/bin/python tests/benchmarks/bench_codecs.py --partitions 1,12,1000 --number 2000
"""

from __future__ import annotations

import argparse
import io
import os
import time
from collections.abc import Callable

from aiokafka.protocol.api import RequestHeader_v1
from aiokafka.protocol.fetch import FetchRequest_v11, FetchResponse_v11
from aiokafka.protocol.produce import ProduceRequest_v8, ProduceResponse_v8
from aiokafka.protocol.struct import Struct

from mirrorline.clients.compiled_codecs import compile_decoder, compile_encoder

BATCH = b"\x00" * 1100


def messages(partitions: int) -> list[tuple[str, type[Struct], tuple, bool]]:
    """(name, class, values, is a request) of each hot message for ``partitions`` partitions of one topic."""
    topic = "mirror-source.orders"
    return [
        ("Fetch request", FetchRequest_v11,
         (-1, 500, 1, 52428800, 0, 1234, 7, [(topic, [(p, 1000 + p, -1, 0, 1048576) for p in range(partitions)])],
          [], ""), True),
        ("Fetch response", FetchResponse_v11,
         (0, 0, 1234, [(topic, [(p, 0, 2000 + p, 2000 + p, 0, [], -1, BATCH) for p in range(partitions)])]), False),
        ("Produce request", ProduceRequest_v8, (None, -1, 30000, [(topic, [(p, BATCH) for p in range(partitions)])]),
         True),
        ("Produce response", ProduceResponse_v8,
         ([(topic, [(p, 0, 3000 + p, -1, 0, [], None) for p in range(partitions)])], 0), False),
    ]


def per_call_us(call: Callable[[], object], number: int) -> float:
    """The best of three timings of ``number`` calls (after as many unmeasured), in microseconds per call."""
    for _ in range(number):
        call()
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(number):
            call()
        best = min(best, time.perf_counter() - started)
    return best / number * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="1,2,12,1000", help="comma list of partitions per message")
    parser.add_argument("--number", type=int, default=20000, help="calls per timing (divided by partitions)")
    args = parser.parse_args(argv)
    header = (1, 11, 42, "mirrorline-A->B-0")
    encode_header = compile_encoder(RequestHeader_v1.SCHEMA)
    rows = [("request header", 0, per_call_us(lambda: RequestHeader_v1.SCHEMA.encode(header), args.number),
             per_call_us(lambda: encode_header(header), args.number))]
    for partitions in (int(p) for p in args.partitions.split(",")):
        number = max(args.number // partitions, 50)
        for name, cls, values, is_request in messages(partitions):
            if is_request:
                encode = compile_encoder(cls.SCHEMA)
                walked = per_call_us(lambda: cls.SCHEMA.encode(values), number)
                compiled = per_call_us(lambda: encode(values), number)
            else:
                frame = cls.SCHEMA.encode(values)
                decode = compile_decoder(cls.SCHEMA)
                walked = per_call_us(lambda: cls.SCHEMA.decode(io.BytesIO(frame)), number)
                compiled = per_call_us(lambda: decode(frame, 0), number)
            rows.append((name, partitions, walked, compiled))
    print(f"=== hot message codecs, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} ===")
    print(f"{'message':<18}{'partitions':>11}{'aiokafka us':>13}{'compiled us':>13}{'speed-up':>10}")
    for name, partitions, walked, compiled in rows:
        print(f"{name:<18}{partitions or '-':>11}{walked:>13.1f}{compiled:>13.1f}{walked / compiled:>9.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
