"""Incremental reconciliation: read only what was copied since the previous run, then merge the maps.

A scheduled reconciliation (``reconcile.incremental=true``) starts from the offset map the
previous run stored for each partition (:mod:`.offset_map_store`). That map covers the source
range ``[source_start, source_end)`` and the target range ``[target_start, target_end)``. The
new run reads, per partition,

- on the source: from just after the last record that had a copy (so the records the mirror had
  not copied yet when the previous run read the target, its ``missing_tail``, are read again)
  to the end now;
- on the target: from the previous run's ``target_end`` to the end now;

and merges: the previous counts without that tail, plus the new counts; the previous runs, plus
the new ones. The result is what a full run would find when the mirror copies in order.

It must read everything again (and does, saying why in the summary's ``full_reason``) when
there is no previous map, when the remote topic changed, when records were deleted from the
copy's reconciled part (the target's log start moved past the map's ``target_start``: retention
or DeleteRecords on the target), or when a log is shorter than the map says (a topic deleted
and re-created). Beyond those, an incremental run cannot see a duplicate written *across* the
boundary (a copy re-sent after the previous run of a record copied before it): it counts as
``unexpected`` in the new part rather than ``duplicated``.
"""

from __future__ import annotations

from dataclasses import replace

from .offset_map import PartitionMap, PartitionRange, Run
from .reconcile_result import PartitionResult

#: Figures of a partition (the keys of PartitionResult.counts()).
FIGURES = ("source", "target", "matched", "missing", "missing_tail", "duplicated", "unexpected", "out_of_order")


def next_window(current: PartitionRange, previous: PartitionMap | None) -> tuple[PartitionRange, str | None]:
    """The range to read now for ``current`` (the logs' bounds), and why everything is read (None: incremental)."""
    if previous is None:
        return current, "no previous map"
    if previous.target_topic != current.target_topic:
        return current, f"the remote topic changed ({previous.target_topic} -> {current.target_topic})"
    if current.target_start > previous.target_start:
        return current, (f"records were deleted from the copy since (its log starts at {current.target_start}, "
                         f"the map at {previous.target_start})")
    if current.source_end < previous.source_end or current.target_end < previous.target_end:
        return current, "a log is shorter than the previous map says (topic re-created?)"
    copied_up_to = max((run.source_end for run in previous.runs), default=previous.source_start)
    source_from = max(copied_up_to, current.source_start)
    return (PartitionRange(current.source_topic, current.partition, current.target_topic, source_from,
                           current.source_end, previous.target_end, current.target_end), None)


def merge_runs(first: tuple[Run, ...] | list[Run], second: list[Run]) -> list[Run]:
    """Runs of the previous map followed by the new ones, joined where they continue each other."""
    out = list(first)
    for run in sorted(second, key=lambda r: r.source_start):
        if out and out[-1].source_end == run.source_start and \
                out[-1].target_start + out[-1].length == run.target_start:
            last = out[-1]
            out[-1] = Run(last.source_start, last.target_start, last.length + run.length)
        else:
            out.append(run)
    return sorted(out, key=lambda r: (r.source_start, r.target_start))


def merge(previous: PartitionMap, window: PartitionRange, new: PartitionResult) -> tuple[PartitionRange, PartitionResult]:
    """The whole range and the result a full run would give: the previous map's, extended by ``new``."""
    counts = {k: int(previous.counts.get(k, 0)) for k in FIGURES}
    tail = counts["missing_tail"]  # read again in this run
    counts["source"] -= tail
    counts["missing"] -= tail
    counts["missing_tail"] = 0
    added = new.counts()
    merged = PartitionResult(new.topic, new.partition, **{k: counts[k] + added[k] for k in FIGURES})
    merged.first_missing = new.first_missing
    merged.last_missing = new.last_missing
    merged.runs = merge_runs(previous.runs, list(new.runs))
    whole = replace(window, source_start=previous.source_start, target_start=previous.target_start)
    return whole, merged
