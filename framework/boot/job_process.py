"""The process one job of a worker cluster runs in: ``python -m mirrorline.boot.job_process``.

Started by :class:`mirrorline.runtime.jobs.process.JobProcess`, which documents the line
protocol: the spec arrives on stdin, events and offset requests leave on stdout, replies and
``cancel`` arrive on stdin. Everything else this process (or Spark, or its JVM) prints goes to
stderr: stdout is moved there before anything else runs, and the protocol keeps a copy of the
original. When stdin closes (the worker died) the process exits at once.

The job runs as a command would run it (:class:`~mirrorline.spark.runner.JobRunner`), with a
:class:`~mirrorline.spark.runner.JobHost` that reports progress and the Spark UI to the worker
and gives the job the worker's offset store. ``cancel`` cancels the job's Spark jobs and its
coroutine; a job may catch the cancellation to hand over what it finished and return a summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Sequence
from typing import IO, Any

from mirrorline.api.errors import ConnectError
from mirrorline.api.jobs import Progress, SourceOffsets
from mirrorline.boot import event_loop, gc_tuning, heap_trim
from mirrorline.clients import process_patches
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.plugins import PluginRegistry
from mirrorline.spark.runner import JobHost, JobRunner, first_line

log = logging.getLogger("mirrorline.job_process")

#: Seconds between two progress events of one display.
PROGRESS_EVERY_S = 1.0


class Channel:
    """The protocol's two ends: JSON lines out (thread-safe), replies in."""

    def __init__(self, out: IO[str]):
        self._out = out
        self._lock = threading.Lock()
        self._next = 0
        self._waiting: dict[int, asyncio.Future] = {}

    def send(self, message: dict[str, Any]) -> None:
        """Write one message (from any thread)."""
        line = json.dumps(message, separators=(",", ":"), default=str)
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()

    async def request(self, message: dict[str, Any]) -> Any:
        """Send a request and wait for the worker's reply; RuntimeError carrying its error."""
        self._next += 1
        future = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = future
        self.send({**message, "id": self._next})
        return await future

    def reply(self, message: dict[str, Any]) -> None:
        """A reply arrived: complete its request."""
        future = self._waiting.pop(message.get("id"), None)
        if future is None or future.done():
            return
        if message.get("error"):
            future.set_exception(RuntimeError(f"the worker's offset store: {message['error']}"))
        else:
            future.set_result(message.get("result"))


class _ReportedProgress(Progress):
    """A progress display that also reports to the worker (at most once a second, and at the end)."""

    def __init__(self, inner: Progress, channel: Channel, total: int, unit: str, description: str):
        self._inner, self._channel = inner, channel
        self.total, self.unit, self.description = total, unit, description
        self.completed = 0
        self._started = time.monotonic()
        self._last = 0.0

    def update(self, completed: int, total: int | None = None) -> None:
        self._inner.update(completed, total)
        if total is not None:
            self.total = total
        self.completed = min(completed, self.total) if self.total else completed
        if time.monotonic() - self._last >= PROGRESS_EVERY_S:
            self._report()

    def _report(self) -> None:
        self._last = time.monotonic()
        elapsed = self._last - self._started
        rate = self.completed / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.completed) / rate if rate > 0 and self.total else None
        self._channel.send({"type": "progress", "completed": self.completed, "total": self.total, "unit": self.unit,
                            "description": self.description, "rate": round(rate, 1),
                            "eta_seconds": None if eta is None else round(eta, 1)})

    def close(self) -> None:
        self._report()
        self._inner.close()


class _WorkerOffsets(SourceOffsets):
    """The worker's offset store, reached through the protocol."""

    def __init__(self, channel: Channel):
        self._channel = channel

    async def get(self, connector: str, partitions: Sequence[dict]) -> list[dict | None]:
        return await self._channel.request({"type": "offsets.get", "connector": connector,
                                            "partitions": [dict(p) for p in partitions]})

    async def put(self, connector: str, offsets) -> None:
        await self._channel.request({"type": "offsets.put", "connector": connector,
                                     "offsets": [[dict(p), None if o is None else dict(o)] for p, o in offsets]})


class WorkerHost(JobHost):
    """The job's view of the worker running it: progress and Spark UI reported, the worker's offsets."""

    def __init__(self, channel: Channel, spec: dict[str, Any]):
        self.channel = channel
        self.job_name = spec.get("name")
        partitions = spec.get("partitions")
        self.partitions = None if partitions is None else [dict(p) for p in partitions]

    def progress(self, inner: Progress, total: int, unit: str, description: str) -> Progress:
        return _ReportedProgress(inner, self.channel, total, unit, description)

    def spark_ui(self, url: str) -> None:
        self.channel.send({"type": "spark_ui", "url": url})

    def worker_offsets(self):
        @contextlib.asynccontextmanager
        async def opened() -> AsyncIterator[SourceOffsets]:
            yield _WorkerOffsets(self.channel)

        return opened()


def _read_stdin(loop: asyncio.AbstractEventLoop, channel: Channel, on_cancel) -> None:
    """The stdin reader (a daemon thread): replies and cancel go to the loop; EOF ends the process."""
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if message.get("type") == "reply":
            loop.call_soon_threadsafe(channel.reply, message)
        elif message.get("type") == "cancel":
            loop.call_soon_threadsafe(on_cancel)
    log.error("the worker running this job is gone (stdin closed): exiting")
    os._exit(3)


async def run(spec: dict[str, Any], channel: Channel) -> None:
    """Run the job ``spec`` names and send its outcome."""
    registry = PluginRegistry.discover()
    runner = JobRunner(registry.jobs(), KAFKA_CLIENTS, registry.config_provider_classes(), WorkerHost(channel, spec))
    job = asyncio.ensure_future(runner.run(spec["job"], spec["settings"], spec.get("client_settings") or {}))
    cancelled = threading.Event()

    def cancel() -> None:
        if cancelled.is_set():
            return
        cancelled.set()
        log.info("job %s: cancel requested", spec.get("name"))
        context = runner.context
        if context is not None:  # Spark first, so the threads waiting on it return
            threading.Thread(target=_quietly(context.cancel_spark), daemon=True).start()
        job.cancel()

    threading.Thread(target=_read_stdin, args=(asyncio.get_running_loop(), channel, cancel), daemon=True,
                     name="job-stdin").start()
    try:
        summary = await job
    except asyncio.CancelledError:
        channel.send({"type": "cancelled", "summary": None})
    except ConnectError as exc:
        channel.send({"type": "error", "message": str(exc) or exc.__class__.__name__})
    except Exception as exc:  # noqa: BLE001 - reported to the worker, which marks the job FAILED
        channel.send({"type": "error", "message": f"{exc.__class__.__name__}: {first_line(exc)}",
                      "trace": "".join(traceback.format_exception(exc))})
    else:
        if cancelled.is_set() and isinstance(summary, dict):
            channel.send({"type": "cancelled", "summary": summary})
        else:
            channel.send({"type": "result", "summary": summary})


def _quietly(fn):
    def call() -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - the job's own outcome reports what matters
            log.warning("cancelling Spark jobs failed: %r", exc)
    return call


def main() -> int:
    """Entry point: protocol on the original stdout, everything else on stderr."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.basicConfig(level=os.environ.get("MIRRORLINE_JOB_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s [job %(process)d] %(name)s: %(message)s")
    process_patches.install()
    gc_tuning.tune()
    line = sys.stdin.readline()
    if not line:
        return 2
    spec = json.loads(line)
    channel = Channel(protocol)
    loop = event_loop.new_event_loop()
    with heap_trim.trimming():
        loop.run_until_complete(run(spec, channel))
    # not asyncio.run: it would wait for threads still blocked in Spark after a cancel. The outcome is sent.
    protocol.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
