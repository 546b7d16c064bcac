"""``mirrorline mm2 --processes N``: one node runs its flows in N processes, so it uses N cores.

A worker process runs everything on one asyncio event loop, so it uses about one core. With
``--processes N`` the command process (the *parent*) starts N-1 more ``mirrorline mm2``
processes on the same file (the *children*). Each runs every selected flow's worker, which
joins the flow's group ``<source>-mm2`` like any other node, so the group shares the tasks over
all N processes as it would over N nodes.

The parent owns the children:

- they run in a session of their own, so a terminal's Ctrl-C reaches the parent alone, and the
  parent stops them in order: when it is asked to stop (SIGTERM/SIGINT), it stops its own workers,
  then sends SIGTERM to each child and waits for it (its tasks flush and store their offsets;
  SIGKILL after :data:`CHILD_STOP_TIMEOUT_S`);
- a child that exits while the parent runs is a failure: the parent logs one line naming it,
  stops its own workers and the other children gracefully, and exits 1, so that the orchestrator
  restarts the whole node (and counts it). It does not restart the child itself: the same
  cause (a bug, memory, a broker refusing) would most likely kill it again, and a restart loop
  inside the pod would hide that from the orchestrator's restart count and back-off;
- a child dies with its parent: on Linux it asks the kernel for SIGTERM when the parent dies
  (``PR_SET_PDEATHSIG``), so a parent that is killed leaves no orphan mirroring on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mirrorline.api import ConfigError, ConnectError

log = logging.getLogger(__name__)

#: How long a child may take to stop after SIGTERM before it is killed. Its own stop is bounded by
#: ``task.shutdown.graceful.timeout.ms`` and ``offset.flush.timeout.ms``, so this is a last resort.
CHILD_STOP_TIMEOUT_S = 60.0
#: Linux ``prctl`` option: the signal a process receives when its parent dies.
PR_SET_PDEATHSIG = 1


def process_count(text: str | int) -> int:
    """The number of processes ``--processes`` asks for: a whole number >= 1, or ``auto`` (one per core).

    Raises ConfigError (one line on the command line) for anything else.
    """
    if str(text).strip().lower() == "auto":
        return os.cpu_count() or 1
    try:
        count = int(str(text).strip())
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigError(f"--processes must be a whole number of at least 1, or 'auto' (one per CPU core), "
                          f"not {str(text)!r}")
    return count


def child_argv(properties: str, clusters: list[str] | None, log_level: str | None) -> list[str]:
    """The command line of one child: ``mirrorline mm2`` on the same file and flows, marked as a child.

    A child serves no ``--listeners`` (the parent answers the probes) and starts no processes.
    """
    argv = [sys.executable, "-m", "mirrorline.cli.main"]
    if log_level:
        argv += ["--log-level", log_level]
    argv += ["mm2", properties, "--child-of", str(os.getpid())]
    if clusters:
        argv += ["--clusters", *clusters]
    return argv


def die_with_parent(parent_pid: int) -> None:
    """In a child: receive SIGTERM when the parent dies (Linux), and refuse to run if it is gone already.

    SIGTERM, not SIGKILL: the child's workers still store their offsets and leave their groups.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent_pid:
        raise ConnectError(f"the mirrorline mm2 process {parent_pid} that started this one is gone; not starting")


def tag_log_lines() -> None:
    """Put the process id in this process's log lines (the CLI's format plus ``[pid N]``).

    The N processes of a node write to the same output; this tells their lines apart, and the
    pid is the one in the workers' ids in the status topic (``A->B@host:pid``).
    """
    for handler in logging.getLogger().handlers:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [pid %(process)d] %(name)s: %(message)s"))


@dataclass(frozen=True)
class ChildExit:
    """A child that has exited: which one, its pid and its exit code (negative: killed by that signal)."""

    number: int
    pid: int
    code: int

    def describe(self) -> str:
        """``exit code 3`` or ``killed by SIGKILL``."""
        if self.code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-self.code).name}"
        return f"exit code {self.code}"


class ChildProcesses:
    """The children of one ``mirrorline mm2 --processes N``: started, watched and stopped here.

    Children are numbered 2..N (the parent is process 1). They are asyncio subprocesses: waiting
    for them never blocks the event loop.
    """

    def __init__(self, argv: list[str], count: int):
        self.argv = argv
        self.count = count
        self._procs: dict[int, asyncio.subprocess.Process] = {}

    @property
    def pids(self) -> list[int]:
        """The children's process ids, in start order."""
        return [proc.pid for proc in self._procs.values()]

    async def start(self) -> None:
        """Start every child; they write to this process's stdout and stderr."""
        for number in range(2, self.count + 2):
            proc = await asyncio.create_subprocess_exec(*self.argv, stdin=asyncio.subprocess.DEVNULL,
                                                        start_new_session=True)
            self._procs[number] = proc
            log.info("Started mm2 process %d of %d (pid %d)", number, self.count + 1, proc.pid)

    async def first_exit(self) -> ChildExit:
        """Wait until any child exits; which one, and how."""
        waits = {asyncio.ensure_future(proc.wait()): number for number, proc in self._procs.items()}
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        number = waits[next(iter(done))]
        proc = self._procs[number]
        return ChildExit(number, proc.pid, proc.returncode)

    async def stop(self, timeout: float | None = None) -> list[ChildExit]:
        """SIGTERM every running child and wait for all; how each ended (a child already gone, as it ended).

        A child still running ``timeout`` seconds later (default :data:`CHILD_STOP_TIMEOUT_S`) is killed.
        """
        timeout = CHILD_STOP_TIMEOUT_S if timeout is None else timeout
        for proc in self._procs.values():
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(p.wait() for p in self._procs.values()))
        except asyncio.TimeoutError:
            for number, proc in self._procs.items():
                if proc.returncode is None:
                    log.error("mm2 process %d (pid %d) did not stop within %.0f s of SIGTERM; killing it",
                              number, proc.pid, timeout)
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
            await asyncio.gather(*(p.wait() for p in self._procs.values()))
        return [ChildExit(number, proc.pid, proc.returncode) for number, proc in self._procs.items()]


async def run_with_children(run_own: Callable[[], Awaitable[None]], children: ChildProcesses) -> None:
    """Run this process's workers (``run_own``) and the children until a stop; raise if a child failed.

    ``run_own`` returns when the process is asked to stop (SIGTERM/SIGINT): then the children
    are stopped too, and a child that did not stop cleanly is a ConnectError. A child that exits
    first is logged as one line; this process then sends itself SIGTERM, so that its workers stop
    as they do when an operator stops the process (``run_own`` returns), the other children are
    stopped too, and a ConnectError names the child.
    """
    total = children.count + 1
    own = watch = None
    failure: str | None = None
    try:
        await children.start()
        own = asyncio.ensure_future(run_own())
        watch = asyncio.ensure_future(children.first_exit())
        done, _ = await asyncio.wait({own, watch}, return_when=asyncio.FIRST_COMPLETED)
        if watch in done and not own.done():
            gone = watch.result()
            failure = f"mm2 process {gone.number} of {total} (pid {gone.pid}) stopped unexpectedly ({gone.describe()})"
            log.error("%s; stopping the other %d and exiting 1, so that the node restarts: its tasks resume from "
                      "their stored offsets. Its own log lines above say why", failure, total - 1)
            signal.raise_signal(signal.SIGTERM)  # this process's workers stop as on an operator's SIGTERM
            await own
        else:
            own.result()  # this process's workers failed to start or run: raised here, children stopped below
    finally:
        try:
            for task in (watch, own):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        finally:
            exits = await children.stop()
    if failure:
        raise ConnectError(f"{failure}; stopped the other processes of this node")
    unclean = [e for e in exits if e.code not in (0, -signal.SIGTERM)]
    if unclean:
        raise ConnectError("mm2 process(es) did not stop cleanly: " + ", ".join(
            f"{e.number} (pid {e.pid}, {e.describe()})" for e in unclean))
    log.info("Stopped the %d other mm2 process(es) of this node", children.count)
