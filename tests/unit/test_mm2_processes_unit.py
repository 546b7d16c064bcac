"""``mirrorline mm2 --processes N`` without Kafka: the option, the child processes' lifecycle, the task spread.

Children here are small Python programs standing in for ``mirrorline mm2`` children: what is
tested is how the parent starts, watches and stops real OS processes, not mirroring.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mirrorline.connectors.mm2.processes as processes
from mirrorline.connectors.mm2.processes import ChildProcesses, child_argv, process_count, run_with_children
from mirrorline.api import ConfigError, ConnectError
from mirrorline.runtime.distributed.assignment import MemberState, assign

#: A child that stops cleanly on SIGTERM (as a mirrorline worker does), and otherwise runs a minute.
POLITE_CHILD = [sys.executable, "-c",
                "import signal, sys, time\n"
                "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
                "time.sleep(60)\n"]


def test_process_count_accepts_whole_numbers_and_auto():
    assert process_count("1") == 1
    assert process_count(" 3 ") == 3
    assert process_count("auto") == (os.cpu_count() or 1)
    assert process_count("AUTO") == process_count("auto")


@pytest.mark.parametrize("text", ["0", "-2", "two", "1.5", ""])
def test_process_count_refuses_anything_else(text):
    with pytest.raises(ConfigError, match="--processes must be a whole number of at least 1, or 'auto'"):
        process_count(text)


@pytest.mark.parametrize("value", ["0", "-1"])
def test_cli_refuses_a_bad_process_count_with_one_line(tmp_path, value):
    result = subprocess.run([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(tmp_path / "mm2.properties"),
                             "--processes", value], capture_output=True, text=True, timeout=120)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0] == (f"mirrorline: error: --processes must be a whole number of at least 1, or 'auto' "
                        f"(one per CPU core), not '{value}'")


def test_child_command_runs_the_same_file_and_flows_without_listeners():
    argv = child_argv("conf/mm2.properties", ["B", "C"], "DEBUG")
    assert argv[:3] == [sys.executable, "-m", "mirrorline.cli.main"]
    assert argv[3:] == ["--log-level", "DEBUG", "mm2", "conf/mm2.properties", "--child-of", str(os.getpid()),
                        "--clusters", "B", "C"]
    assert "--listeners" not in child_argv("mm2.properties", None, None)


async def _until_sigterm(seen: list[str], ready: asyncio.Event | None = None, run_for: float | None = None) -> None:
    """Stands in for the launcher: runs until this process gets SIGTERM (or for ``run_for`` seconds)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        if run_for is not None:
            await asyncio.wait_for(stop.wait(), run_for)
        else:
            await stop.wait()
        seen.append("SIGTERM")
    except asyncio.TimeoutError:
        seen.append("ran out")
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def test_a_stop_of_this_process_stops_every_child():
    children = ChildProcesses(POLITE_CHILD, 2)
    seen: list[str] = []
    started = time.monotonic()
    await run_with_children(lambda: _until_sigterm(seen, run_for=1.0), children)
    assert seen == ["ran out"]
    assert len(children.pids) == 2 and all(not Path(f"/proc/{pid}").exists() for pid in children.pids)
    assert time.monotonic() - started < 10


async def test_a_child_that_exits_stops_this_process(caplog):
    children = ChildProcesses([sys.executable, "-c", "import time, sys; time.sleep(0.5); sys.exit(3)"], 1)
    seen: list[str] = []
    with pytest.raises(ConnectError, match=r"mm2 process 2 of 2 \(pid \d+\) stopped unexpectedly "
                                           r"\(exit code 3\); stopped the other processes"):
        await run_with_children(lambda: _until_sigterm(seen), children)
    assert seen == ["SIGTERM"]  # this process's workers were stopped as on an operator's SIGTERM
    reports = [r for r in caplog.records if "stopped unexpectedly" in r.getMessage()]
    assert len(reports) == 1 and reports[0].levelname == "ERROR"
    assert "exiting 1, so that the node restarts" in reports[0].getMessage()


async def test_a_child_killed_is_reported_by_signal_name(caplog):
    children = ChildProcesses(POLITE_CHILD, 2)

    async def own() -> None:
        await asyncio.sleep(0.5)
        os.kill(children.pids[1], signal.SIGKILL)
        await _until_sigterm([])

    with pytest.raises(ConnectError, match=r"mm2 process 3 of 3 \(pid \d+\) stopped unexpectedly \(killed by SIGKILL\)"):
        await run_with_children(own, children)
    assert [e.code for e in await children.stop()] == [0, -signal.SIGKILL]  # the other one stopped on SIGTERM
    assert all(not Path(f"/proc/{pid}").exists() for pid in children.pids)


async def test_workers_of_this_process_that_fail_to_start_stop_the_children_and_say_why():
    children = ChildProcesses(POLITE_CHILD, 2)

    async def own() -> None:
        await asyncio.sleep(0.3)
        raise ConnectError("Kafka at x:1 is unreachable")

    with pytest.raises(ConnectError, match="Kafka at x:1 is unreachable"):
        await run_with_children(own, children)
    assert len(children.pids) == 2 and all(not Path(f"/proc/{pid}").exists() for pid in children.pids)


async def test_a_child_that_ignores_sigterm_is_killed_and_reported(monkeypatch):
    monkeypatch.setattr(processes, "CHILD_STOP_TIMEOUT_S", 1.0)
    stubborn = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                      "time.sleep(60)"]
    children = ChildProcesses(stubborn, 1)
    with pytest.raises(ConnectError, match=r"did not stop cleanly: 2 \(pid \d+, killed by SIGKILL\)"):
        await run_with_children(lambda: asyncio.sleep(0.5), children)


def test_a_child_dies_with_its_parent(tmp_path):
    """A parent killed with SIGKILL: its child gets SIGTERM from the kernel (Linux) and stops."""
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux only")
    marker = tmp_path / "child-stopped"
    child = ("import os, signal, sys, time\n"
             "from mirrorline.connectors.mm2.processes import die_with_parent\n"
             f"signal.signal(signal.SIGTERM, lambda *a: (open({str(marker)!r}, 'w').close(), sys.exit(0)))\n"
             "die_with_parent(int(sys.argv[1]))\n"
             "print(os.getpid(), flush=True)\n"
             "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c",
                               "import os, subprocess, sys, time\n"
                               f"subprocess.Popen([sys.executable, '-c', {child!r}, str(os.getpid())])\n"
                               "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        child_pid = int(parent.stdout.readline())
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while not marker.exists():
            assert time.monotonic() < deadline, "the child did not get SIGTERM when its parent died"
            time.sleep(0.1)
    finally:
        if parent.poll() is None:
            parent.kill()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child_pid}").exists() and "Z" not in Path(f"/proc/{child_pid}/stat").read_text().split()[2]:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_child_refuses_to_start_when_its_parent_is_gone():
    with pytest.raises(ConnectError, match="that started this one is gone"):
        processes.die_with_parent(os.getppid() + 1_000_000)


MM2 = ["MirrorCheckpointConnector", "MirrorHeartbeatConnector", "MirrorSourceConnector"]


@pytest.mark.parametrize("counts", [
    {"MirrorHeartbeatConnector": 1, "MirrorSourceConnector": 2},
    {"MirrorCheckpointConnector": 1, "MirrorHeartbeatConnector": 1, "MirrorSourceConnector": 2},
    {"MirrorCheckpointConnector": 2, "MirrorHeartbeatConnector": 1, "MirrorSourceConnector": 2},
])
@pytest.mark.parametrize("workers", [2, 3])
def test_processes_joining_a_worker_that_runs_everything_each_get_a_source_task(counts, workers):
    """The parent (or a restarted node's first process) owns every task when the others join.

    Before tasks were spread per connector, the tasks sorting last (all MirrorSource ones) were
    the surplus given away, so with a checkpoint task both MirrorSource tasks went to one child.
    """
    tasks = tuple((c, i) for c in MM2 for i in range(counts.get(c, 0)))
    names = ["p"] + [f"c{i}" for i in range(1, workers)]
    members = {n: MemberState(n, 5, tuple(MM2) if n == "p" else (), tasks if n == "p" else ()) for n in names}
    for _ in range(3):  # revoke, then hand out, then settled
        result = assign(members, "p", MM2, counts, 5)
        members = {n: MemberState(n, 5, result[n].connectors, result[n].tasks) for n in names}
    sources = {n: [t for t in result[n].tasks if t[0] == "MirrorSourceConnector"] for n in names}
    assert sorted(len(s) for s in sources.values())[-2:] == [1, 1], sources
    assert sorted(t for n in names for t in result[n].tasks) == sorted(tasks)
    assert max(len(result[n].tasks) for n in names) - min(len(result[n].tasks) for n in names) <= 1


@pytest.mark.parametrize("seed", range(10))
def test_workers_joining_one_that_runs_everything_get_a_fair_part_of_each_connector(seed):
    """Any connectors and task counts: once settled, no worker holds more than ceil(n / w) of a connector's tasks."""
    rng = random.Random(seed)
    for _ in range(50):
        connectors = [f"c{i}" for i in range(rng.randint(1, 5))]
        counts = {c: rng.randint(0, 8) for c in connectors}
        names = [f"w{i}" for i in range(rng.randint(2, 6))]
        tasks = tuple((c, i) for c in connectors for i in range(counts[c]))
        members = {n: MemberState(n, 1, (), tasks if n == "w0" else ()) for n in names}
        for _ in range(3):
            result = assign(members, "w0", connectors, counts, 1)
            members = {n: MemberState(n, 1, result[n].connectors, result[n].tasks) for n in names}
        for name in names:
            held = result[name].tasks
            assert abs(len(held) - len(tasks) / len(names)) < 1
            for connector in connectors:
                mine = sum(1 for c, _ in held if c == connector)
                assert mine <= math.ceil(counts[connector] / len(names)), (counts, name, result)
