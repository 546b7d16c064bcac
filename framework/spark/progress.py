"""Progress of a long job step: a rich bar (records/s, ETA) on a terminal, log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

from mirrorline.api.jobs import Progress

#: Seconds between two log lines when the output is not a terminal.
LOG_EVERY_S = 5.0


def make_progress(total: int, unit: str, description: str, logger: logging.Logger,
                  stream: TextIO | None = None) -> Progress:
    """A rich bar when ``stream`` (stderr by default) is a terminal, else a progress that logs."""
    stream = stream or sys.stderr
    if stream.isatty():
        return RichProgress(total, unit, description, stream)
    return LoggedProgress(total, unit, description, logger)


class _Rate:
    """Units per second since the start, and the seconds left at that rate."""

    def __init__(self, total: int):
        self.total = total
        self.started = time.monotonic()
        self.completed = 0

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.completed / elapsed if elapsed > 0 else 0.0

    def eta(self) -> float | None:
        rate = self.rate()
        return (self.total - self.completed) / rate if rate > 0 else None


class LoggedProgress(Progress, _Rate):
    """Progress as log lines: at most one every LOG_EVERY_S seconds, and one at the end."""

    def __init__(self, total: int, unit: str, description: str, logger: logging.Logger):
        _Rate.__init__(self, total)
        self.unit, self.description, self.logger = unit, description, logger
        self._last_log = 0.0
        self._closed = False

    def update(self, completed: int, total: int | None = None) -> None:
        if total is not None:
            self.total = total
        self.completed = min(completed, self.total)
        now = time.monotonic()
        if now - self._last_log >= LOG_EVERY_S:
            self._last_log = now
            self._log()

    def _log(self) -> None:
        eta = self.eta()
        share = 100.0 * self.completed / self.total if self.total else 100.0
        self.logger.info("%s: %d/%d %s (%.0f%%), %.0f %s/s, ETA %s", self.description or "progress",
                         self.completed, self.total, self.unit, share, self.rate(), self.unit,
                         "-" if eta is None else f"{eta:.0f} s")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._log()


class RichProgress(Progress):
    """A rich progress bar with the count, the rate in units per second and the time left."""

    def __init__(self, total: int, unit: str, description: str, stream: TextIO):
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self.unit = unit
        self._bar = Bar(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn(f"{{task.fields[rate]}} {unit}/s"), TimeElapsedColumn(), TextColumn("ETA"),
                        TimeRemainingColumn(), console=Console(file=stream), transient=False)
        self._rate = _Rate(total)
        self._task = self._bar.add_task(description or unit, total=total, rate="-")
        self._bar.start()
        self._closed = False

    def update(self, completed: int, total: int | None = None) -> None:
        if total is not None:
            self._rate.total = total
        self._rate.completed = min(completed, self._rate.total)
        self._bar.update(self._task, completed=self._rate.completed, total=self._rate.total,
                         rate=f"{self._rate.rate():,.0f}")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._bar.stop()
