"""What every task runner shares, source or sink (Kafka Connect's ``WorkerTask``): supervision written once.

A runner drives one plugin task under the worker. The rules that must not differ between the
two kinds of task live here:

- **Supervision.** Each loop runs under :meth:`TaskRunner._supervised`: an exception escaping
  it stops every other loop and reports the failure once, through ``on_failure`` (the Worker
  records FAILED with the trace, logs and counts it). A task never says RUNNING while doing
  nothing.
- **Retrying.** While a retriable error lasts, the task says so in its status
  (``"warnings": {"retrying": ...}``) and in the ``task_retrying`` gauge. A source task retries
  writes for at most ``delivery.timeout.ms``, then fails (:mod:`mirrorline.runtime.worker_task`).
- **Shutdown of the record pipeline.** The task's own background work
  (``context.run_in_background``), its transforms, converters and error reporters are closed in
  one place, whatever the kind of task.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any


from mirrorline.api.errors import ConnectError
from mirrorline.clients.errors import translate
from mirrorline.clients.runtime_clients import KAFKA_CLIENTS
from mirrorline.api.records import ConnectorTaskId
from mirrorline.runtime import metrics
from mirrorline.runtime.background import BackgroundTasks, without_stray_cancellation
from mirrorline.runtime.bounded import bounded
from mirrorline.runtime.converters import RecordConverters
from mirrorline.runtime.error_handling import ErrorHandler, ErrorSettings
from mirrorline.runtime.owned_clients import OwnedClients
from mirrorline.runtime.transform_chain import TransformChain
from mirrorline.storage.status import State

log = logging.getLogger(__name__)

StatusCallback = Callable[[ConnectorTaskId, State, str | None], Awaitable[None]]
FailureCallback = Callable[[ConnectorTaskId, BaseException], Awaitable[None]]

RETRY_BACKOFF_S = 1.0
RETRY_BACKOFF_MAX_S = 10.0
#: How long each client an abandoned task leaves open may take to close (its producer gives up at once)
CLOSE_NOW_TIMEOUT_S = 5.0
#: A loop that ignored its cancellation at stop is cancelled again this often (see :meth:`TaskRunner._stop_loops`)
LOOP_RECANCEL_S = 1.0
#: The status warning keys the runtime itself reports.
RETRYING = "retrying"
STALLED = "stalled"
UNACKNOWLEDGED = "unacknowledged"


class TaskRunner(ABC):
    """The state and rules shared by :class:`WorkerSourceTask` and :class:`WorkerSinkTask`, and the
    lifecycle the Worker drives every task through (``start``, ``pause``, ``resume``, ``stop``).

    ``transforms`` None runs no transform code; ``converters`` None or pass-through runs no
    converter code (the mirror path pays for neither); ``errors`` defaults to
    ``errors.tolerance=none`` without reporters.
    """

    # -- the lifecycle the Worker drives ---------------------------------------------------
    @abstractmethod
    async def start(self, paused: bool = False) -> None:
        """Start the task's clients, the task and its loops; a failure is reported through ``on_failure``."""

    @abstractmethod
    async def pause(self) -> None:
        """Stop handing records to or from the task until resumed (Connect's PAUSED)."""

    @abstractmethod
    async def resume(self) -> None:
        """Carry on after a pause."""

    @abstractmethod
    async def stop(self, timeout: float = 10.0) -> None:
        """Stop the loops, write out and commit what can be, then stop the task and close its clients."""

    @abstractmethod
    def forget_topics(self) -> None:
        """Forget the topics the task used (active-topic tracking reset)."""

    def __init__(self, task_id: ConnectorTaskId, task: Any, config: dict[str, str], *,
                 on_status: StatusCallback, on_failure: FailureCallback, flush_interval_s: float,
                 start_timeout_s: float, on_topic: Callable[[str, str], None] | None,
                 transforms: TransformChain | None, converters: RecordConverters | None,
                 errors: ErrorHandler | None):
        self.id = task_id
        self.task = task
        self.config = config
        #: the clients the task opens through its context: closed by :meth:`release_clients` if its stop is abandoned
        self.clients = OwnedClients(KAFKA_CLIENTS, f"Task {task_id}")
        self._on_status = on_status
        self._on_failure = on_failure
        self._on_topic = on_topic
        self._flush_interval_s = flush_interval_s
        self._start_timeout_s = start_timeout_s
        self._chain = transforms
        self._converters = None if converters is None or converters.is_passthrough else converters
        self._errors = errors if errors is not None else ErrorHandler(task_id, ErrorSettings())
        self._background = BackgroundTasks(str(task_id))
        self._failure_report: asyncio.Future | None = None
        #: the plugin's context, once the task is initialized (it owns the task's background work)
        self._context: Any = None
        #: Conditions shown in the task's status (key -> message), reported by the runtime and the task.
        self.warnings: dict[str, str] = {}
        self.failed = False
        #: set when the stop begins: from then on nothing new is handed on and no failure is reported
        self.stopping = False
        self._labels = (task_id.connector, str(task_id.task))
        # Series exist from the start at 0: Prometheus' increase() sees a counter's first step, and the
        # dashboard's panels and the alert rules read 0, not "No data", on a healthy task.
        metrics.TASK_FAILURES.labels(*self._labels)
        metrics.TASK_RESTARTS.labels(*self._labels)
        metrics.TASK_RETRYING.labels(*self._labels)
        metrics.TASK_STALLED.labels(*self._labels)

    # -- supervision -----------------------------------------------------------------------
    async def _supervised(self, loop: Callable[[], Awaitable[None]], name: str) -> None:
        try:
            await without_stray_cancellation(loop(), f"Task {self.id}: its {name} loop")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not isinstance(translate(exc), ConnectError):  # a Kafka client's errors too
                log.debug("Task %s: its %s loop raised", self.id, name, exc_info=True)
            self._fail(exc)

    async def _stop_loops(self, timeout: float) -> None:
        """The first step of every stop: mark the task stopping, then cancel its loops and wait for them,
        cancelling again every :data:`LOOP_RECANCEL_S` one that ignored it (Python 3.11's
        ``asyncio.wait_for`` can swallow a cancel; so can plugin code)."""
        self.stopping = True
        await self._background.close(timeout, recancel_s=LOOP_RECANCEL_S)

    def _fail(self, exc: BaseException) -> None:
        """Stop every loop (but the caller's) and report the failure, once; after the stop began, only log
        it: the task is going away, and a failure report would have the supervisor start it again."""
        if self.failed:
            return
        if self.stopping:
            self._background.cancel_all(except_current=True)
            if getattr(exc, "after_stop", False):  # its message says so already
                log.warning("%s; not reported as a failure", exc)
            else:
                log.warning("Task %s: %r after its stop began; not reported as a failure (it restarts, if it does, "
                            "from its last stored offsets)", self.id, exc)
            return
        self.failed = True
        self._on_failing()
        self._background.cancel_all(except_current=True)
        metrics.TASK_RUNNING.labels(*self._labels).set(0)
        self._failure_report = asyncio.ensure_future(self._on_failure(self.id, exc))

    def _on_failing(self) -> None:
        """What a kind of runner does first when its task fails (nothing by default)."""

    def _set_retrying(self, message: str | None) -> None:
        """Show (or, with None, clear) a retriable condition in the status and the gauge."""
        if message is None:
            if self.warnings.pop(RETRYING, None) is not None:
                metrics.TASK_RETRYING.labels(*self._labels).set(0)
                log.info("Task %s recovered and resumed", self.id)
        else:
            if RETRYING not in self.warnings:
                metrics.TASK_RETRYING.labels(*self._labels).set(1)
            self.warnings[RETRYING] = message

    async def _call_task(self, what: str, coro: Awaitable[Any], timeout: float) -> None:
        """Call one of the task's own methods on the way out; a failure is logged, never raised."""
        try:
            await bounded(coro, timeout, f"Task {self.id}: {what}()")
        except Exception as exc:
            log.error("Task %s: %s() raised or hung (%r); its resources may leak", self.id, what, exc)

    def abandon(self) -> None:
        """Cancel, without waiting, whatever of the task still runs: its stop ran out of time and
        was given up on. Left alone, its loops and the plugin's background work (an offset-syncs
        writer, say) would go on against clients the stop already closed."""
        self._background.cancel_all()
        if self._context is not None:
            self._context.cancel_background()

    async def release_clients(self) -> None:
        """After :meth:`abandon`: close at once the clients the abandoned stop did not get to, those
        the task opened through its context included."""
        await self.clients.close_all(CLOSE_NOW_TIMEOUT_S)

    async def _close_pipeline(self, timeout: float) -> None:
        """Stop the task's own background work, then close its transforms, converters and error reporters."""
        if self._context is not None:  # context.run_in_background work
            await self._context.close_background(timeout)
        if self._chain is not None:
            self._chain.close()
            self._chain = None
        if self._converters is not None:
            self._converters.close()
            self._converters = None
        await self._errors.close()
        await self.clients.close_left_open(min(timeout, CLOSE_NOW_TIMEOUT_S))
