"""Running ``mirrorline mm2`` in tests: its own worker groups and internal topics, start and stop.

Tests of one session share clusters A and B, so each test's MM2 run names its own worker groups
and config/offset/status topics (:func:`isolated_state`), or it would join another test's flows.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path


def isolated_state(state: str) -> str:
    """mm2.properties lines giving the flows A->B and B->A worker groups and internal topics of their own."""
    return (f"A.group.id = {state}-B-mm2\n"
            f"B.group.id = {state}-A-mm2\n"
            f"config.storage.topic = mm2-configs.{state}.internal\n"
            f"offset.storage.topic = mm2-offsets.{state}.internal\n"
            f"status.storage.topic = mm2-status.{state}.internal\n")


def start_mm2(properties: str | Path, log_path: str | Path | None = None, *args: str) -> subprocess.Popen:
    """Run ``mirrorline mm2 PROPERTIES [ARGS]`` in the background; output appended to ``log_path``
    (discarded without one)."""
    output = open(log_path, "a") if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen([sys.executable, "-m", "mirrorline.cli.main", "mm2", str(properties), *args],
                                stdout=output, stderr=subprocess.STDOUT, text=True)
    finally:
        if log_path:
            output.close()


def stop_mm2(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
    """Send ``sig`` (SIGTERM: the workers store their offsets first) and return the exit code."""
    if proc.poll() is None:
        proc.send_signal(sig)
    return proc.wait(timeout)
