"""Where a source partition's next fetch stands against the partition's log, and what that means.

A mirror task's position is the offset of the next record it will copy. Normally it lies in
``[log_start, log_end]`` (``log_end`` being the offset the next produced record will get).
Outside that range the broker answers OFFSET_OUT_OF_RANGE, and the two sides mean different
things:

* below the log start: records ``[position, log_start)`` were deleted (retention, or
  DeleteRecords) before they were copied; they are lost for the target.
* beyond the log end: the partition's offsets went backwards, which happens when the topic was
  deleted and re-created (or its log was truncated); the records now in it are new ones.

MM2 resets silently in both cases (its consumer's ``auto.offset.reset``); the task reports
them and resumes from the log start.

A re-created topic can also hold more records than the old position by the time the task reads
it: the position is then inside the new log and the offsets say nothing. The topic ID does
(:mod:`.topic_identity`): a position in a topic whose ID changed is treated as "offsets went
backwards" wherever it falls (``check_position(..., recreated=True)``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class PositionState(enum.Enum):
    """How a position compares with the log it reads."""

    OK = "ok"
    LOST_TO_RETENTION = "lost-to-retention"
    OFFSETS_WENT_BACKWARDS = "offsets-went-backwards"


@dataclass(frozen=True)
class PositionCheck:
    """The verdict on one partition's position, with the offsets it was based on."""

    state: PositionState
    position: int
    log_start: int
    log_end: int
    #: (old topic ID, new topic ID) when the topic was found re-created by its ID, else None
    recreated: tuple[str | None, str] | None = None

    @property
    def lost_records(self) -> int:
        """How many records were deleted before they were copied (``log_start - position``), else 0."""
        return self.log_start - self.position if self.state is PositionState.LOST_TO_RETENTION else 0

    @property
    def resume_at(self) -> int:
        """The offset to copy from next: the position itself when it is valid, else the log start."""
        return self.position if self.state is PositionState.OK else self.log_start


def check_position(position: int, log_start: int, log_end: int,
                   recreated: tuple[str | None, str] | None = None) -> PositionCheck:
    """Classify ``position`` against a partition whose records are ``[log_start, log_end)``;
    ``recreated``: ``(old topic ID, new topic ID)`` when the position was taken in an older topic
    of the same name.

    >>> check_position(100, 150, 200).lost_records
    50
    >>> check_position(100, 0, 30).state.value
    'offsets-went-backwards'
    """
    if recreated or position > log_end:
        state = PositionState.OFFSETS_WENT_BACKWARDS
    elif position < log_start:
        state = PositionState.LOST_TO_RETENTION
    else:
        state = PositionState.OK
    return PositionCheck(state, position, log_start, log_end, recreated)
