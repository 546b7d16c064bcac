"""One job run in a process of its own, and the line protocol between it and its worker.

Each job a worker runs gets its own process (``python -m mirrorline.boot.job_process``), so each
has its own Spark driver (one SparkContext per process, with its own ``spark.master``), a
crashing JVM never takes the worker down, and cancelling means stopping one process. The
process dies with its worker: it is started with Linux's parent-death signal (SIGKILL), and it
also exits when its stdin closes; its Spark JVM in turn exits when the process dies (pyspark's
gateway watches its own stdin). So a worker killed mid-job leaves no writer behind while
another worker resumes the job.

The protocol: one JSON object per line. The worker first writes the job's spec to the process's
stdin; then

- the process writes on its stdout ``progress`` (``completed``, ``total``, ``unit``,
  ``description``, ``rate``, ``eta_seconds``), ``spark_ui`` (``url``), ``offsets.get`` /
  ``offsets.put`` requests (``id``, ``connector``, ``partitions`` / ``offsets``: the job's
  :class:`~mirrorline.api.jobs.SourceOffsets` are the worker's own offset store), and at the
  end exactly one of ``result`` (``summary``), ``cancelled`` (``summary`` or null) or
  ``error`` (``message``, ``trace``);
- the worker writes on its stdin ``reply`` (``id``, ``result`` or ``error``) and ``cancel``.

Anything else the process or Spark prints goes to its stderr (the worker's log).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mirrorline.storage.offsets import OffsetStore

log = logging.getLogger(__name__)

#: The module the job process runs (process wiring, where Spark is built).
ENTRY = "mirrorline.boot.job_process"
#: Seconds a cancelled or stopped process gets to end before it is killed.
STOP_TIMEOUT_S = 60.0
#: Longest protocol line read (results of large reconciliations).
LINE_LIMIT = 64 * 1024 * 1024


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass  # not Linux: the process still exits when its stdin closes


@dataclass(frozen=True)
class Outcome:
    """How a job process ended: ``kind`` is result, cancelled, error or died."""

    kind: str
    summary: Any = None
    message: str = ""
    trace: str | None = None


class JobProcess:
    """Runs one job in a child process and serves its requests; see the module docstring."""

    def __init__(self, spec: dict[str, Any], offset_store: OffsetStore,
                 on_event: Callable[[dict[str, Any]], Awaitable[None]]):
        self.spec = spec
        self.offset_store = offset_store
        self.on_event = on_event
        self._process: asyncio.subprocess.Process | None = None
        self._outcome: Outcome | None = None
        self._reader: asyncio.Task | None = None
        self._requests: set[asyncio.Task] = set()

    async def start(self) -> None:
        """Start the process and hand it the spec."""
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", ENTRY, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=None, limit=LINE_LIMIT, preexec_fn=_die_with_parent,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        await self._send(self.spec)
        self._reader = asyncio.create_task(self._read(), name=f"job-process-{self.spec.get('name')}")

    @property
    def pid(self) -> int | None:
        """The process id (None before start)."""
        return self._process.pid if self._process is not None else None

    async def _send(self, message: dict[str, Any]) -> None:
        process = self._process
        if process is None or process.stdin is None or process.returncode is not None:
            return
        try:
            process.stdin.write(json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n")
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the process ended; its outcome says how

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        while True:
            try:
                line = await stdout.readline()
            except (ValueError, asyncio.LimitOverrunError) as exc:
                self._outcome = Outcome("error", message=f"the job process wrote an unreadable line: {exc}")
                break
            if not line:
                break
            try:
                message = json.loads(line)
            except ValueError:
                log.warning("Job %s: ignoring a line that is not the protocol's: %r", self.spec.get("name"),
                            line[:200])
                continue
            kind = message.get("type")
            if kind in ("offsets.get", "offsets.put"):
                task = asyncio.create_task(self._serve(message))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)
            elif kind == "result":
                self._outcome = Outcome("result", summary=message.get("summary"))
            elif kind == "cancelled":
                self._outcome = Outcome("cancelled", summary=message.get("summary"))
            elif kind == "error":
                self._outcome = Outcome("error", message=str(message.get("message") or "the job failed"),
                                        trace=message.get("trace"))
            else:
                try:
                    await self.on_event(message)
                except Exception:  # noqa: BLE001 - a display problem must not stop the job
                    log.exception("Job %s: handling %s failed", self.spec.get("name"), kind)

    async def _serve(self, message: dict[str, Any]) -> None:
        request = message.get("id")
        try:
            if message["type"] == "offsets.get":
                result: Any = await self.offset_store.get(message["connector"], message["partitions"])
            else:
                await self.offset_store.put(message["connector"],
                                            [(p, o) for p, o in message["offsets"]])
                result = None
            await self._send({"type": "reply", "id": request, "result": result})
        except Exception as exc:  # noqa: BLE001 - the job sees the error as its own
            await self._send({"type": "reply", "id": request, "error": f"{exc.__class__.__name__}: {exc}"})

    async def wait(self) -> Outcome:
        """Wait for the process to end; how it ended."""
        assert self._process is not None and self._reader is not None
        await self._reader
        code = await self._process.wait()
        if self._requests:
            await asyncio.gather(*self._requests, return_exceptions=True)
        if self._outcome is not None:
            return self._outcome
        return Outcome("died", message=f"the job process exited with status {code} without a result")

    async def cancel(self) -> None:
        """Ask the job to cancel (it cancels its Spark jobs and may hand over what it finished)."""
        await self._send({"type": "cancel"})

    async def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """End the process without a hand-off (the job resumes elsewhere): SIGTERM, SIGKILL after ``timeout``."""
        process = self._process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            async with asyncio.timeout(timeout):
                await process.wait()
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
