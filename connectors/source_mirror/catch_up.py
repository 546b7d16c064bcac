"""CatchUpWatch: tells a MirrorSource task when it has caught up after a backlog (beyond MM2).

A task that copied a backlog (a topic's history on first start, the records that piled up while a
cluster was down) stores its source offsets and promotes its last offset syncs only at its next
offset flush, up to ``offset.flush.interval.ms`` (60 s by default) after it caught up. Checkpoints,
and with them the positions groups fail over to, follow those syncs. MM2 waits for that flush;
a mirrorline task asks for it as soon as it has caught up (``context.request_commit()``), so the
target reflects the end of a backlog up to a flush interval sooner, and a task restarted just
after it does not copy the backlog's tail again.

The watch follows the task's lag: the records still to copy over its partitions, the sum of its
``replication-lag-records`` gauges, which the task keeps as it sets them (partitions with records
at every poll, the others every few seconds). It is *behind* once that sum reached
:data:`BACKLOG_RECORDS`, and has *caught up* when, behind, the sum fell to a hundredth of the
highest it reached (:data:`CAUGHT_UP_FRACTION`): records in flight at a steady rate are not a
backlog left. Then it says so once, and at most once every :data:`MIN_GAP_S`: bursts closer
together share one flush, and a flow whose lag swings around the threshold asks no more often.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: A task is behind once this many records wait to be copied over its partitions
BACKLOG_RECORDS = 10_000
#: ... and has caught up when they fell to this share of the most that waited
CAUGHT_UP_FRACTION = 0.01
#: Catch-ups closer together than this share one commit request
MIN_GAP_S = 10.0


class CatchUpWatch:
    """Follows a task's lag and says when it has just caught up after a backlog (module docstring)."""

    def __init__(self, backlog_records: int = BACKLOG_RECORDS, min_gap_s: float = MIN_GAP_S,
                 clock: Callable[[], float] = time.monotonic):
        if backlog_records < 1:
            raise ValueError(f"backlog_records must be 1 or more, not {backlog_records}")
        self._backlog = backlog_records
        self._min_gap_s = min_gap_s
        self._clock = clock
        #: the most records that waited since the task fell behind; 0 while it is not behind
        self.peak = 0
        self._last_caught_up = -math.inf

    def lag_is(self, records: int) -> bool:
        """The task's lag is now ``records``: True when that ends a backlog, and the task should ask
        for its offsets to be stored now; then not again until it falls behind anew."""
        if records >= self.peak:
            if records >= self._backlog:
                self.peak = records
            return False
        if records > self.peak * CAUGHT_UP_FRACTION:
            return False
        now = self._clock()
        if now - self._last_caught_up < self._min_gap_s:
            return False  # stays behind: says so once the gap is over, if the lag is still this low
        self.peak = 0
        self._last_caught_up = now
        return True
