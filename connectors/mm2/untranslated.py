"""Partitions a failover cannot translate: never passed over in silence.

A consumer group moved to another cluster reads each partition from the offset committed for it
there. A partition the group has a position for on the origin but that the move cannot translate
(no checkpoint for it, no exact placement) gets no committed offset, so the application starts it
at its ``auto.offset.reset``: with ``latest`` it never reads the records between its real position
and the end, with ``earliest`` it reads again everything before its real position. The failover
tools list every such partition in the plan, with both counts when the origin answers (its exact
position is then found by content), and refuse to act unless ``--allow-partial``.

A partition where both counts are 0 (nothing was ever written there, or nothing is left to read)
loses nothing either way: it is listed, and does not make the command refuse.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirrorline.api import ConnectError, Consumer, TopicPartition
from mirrorline.connectors.mm2.locate import bounds, translate_position

#: The option that lets a failover go on without them.
ALLOW_PARTIAL = "--allow-partial"


@dataclass(frozen=True)
class Untranslated:
    """One partition of a group that the move leaves at ``auto.offset.reset`` on the destination."""

    group: str
    destination: TopicPartition
    #: the group's committed position on the origin (None: unknown, the origin did not answer)
    origin_position: int | None
    #: records a consumer starting at ``auto.offset.reset=latest`` would never read (None: unknown)
    skipped_if_latest: int | None
    #: records it would read again with ``earliest`` (None: unknown)
    reread_if_earliest: int | None
    reason: str

    @property
    def harmless(self) -> bool:
        """True when the group loses and re-reads nothing there whatever its ``auto.offset.reset``."""
        return self.skipped_if_latest == 0 and self.reread_if_earliest == 0

    @property
    def name(self) -> str:
        """``topic-partition`` on the destination."""
        return f"{self.destination.topic}-{self.destination.partition}"


async def impact(origin: Consumer, origin_tp: TopicPartition, position: int,
                 destination: Consumer, destination_tp: TopicPartition) -> tuple[int | None, int | None, str]:
    """(skipped with latest, re-read with earliest, why unknown) for a group at ``position`` on the origin.

    Its exact place on the destination is found by content (both clusters must answer).
    """
    start, end = await bounds(destination, destination_tp)
    found = await translate_position(origin, origin_tp, position, destination, destination_tp)
    if found.position is None:
        return None, None, found.reason
    return max(0, end - found.position), max(0, found.position - start), ""


def blocking(items: list[Untranslated]) -> list[Untranslated]:
    """The ones that lose or re-read records (or may): those a failover refuses without --allow-partial."""
    return [u for u in items if not u.harmless]


def _count(values: list[int | None]) -> str:
    known = [v for v in values if v is not None]
    text = f"{sum(known)}"
    unknown = len(values) - len(known)
    return text + (f" (+ unknown on {unknown} partition(s))" if unknown else "")


def summary_line(items: list[Untranslated], origin: str) -> str | None:
    """The recovery-point line counting what the untranslated partitions lose or re-read (None: none)."""
    risky = blocking(items)
    if not risky:
        return None
    groups = len({u.group for u in risky})
    return (f"without translation: {len(risky)} partition(s) of {groups} group(s) with a position on {origin} "
            f"(listed below): at auto.offset.reset=latest a consumer skips "
            f"{_count([u.skipped_if_latest for u in risky])} record(s), at earliest it re-reads "
            f"{_count([u.reread_if_earliest for u in risky])}")


def describe(u: Untranslated, origin: str) -> str:
    """One plan line for an untranslated partition."""
    where = "" if u.origin_position is None else f" (position {u.origin_position} on {origin})"
    if u.harmless:
        return f"no translation needed: {u.name}{where}: nothing to read there whatever auto.offset.reset says"
    skip = "?" if u.skipped_if_latest is None else str(u.skipped_if_latest)
    reread = "?" if u.reread_if_earliest is None else str(u.reread_if_earliest)
    return (f"NO TRANSLATION: {u.name}{where}: {u.reason}; at auto.offset.reset=latest it skips {skip} record(s), "
            f"at earliest it re-reads {reread}")


def by_group(items: list[Untranslated]) -> str:
    """``group g: A.orders-0, A.orders-1; group h: ...`` (every partition named)."""
    groups: dict[str, list[str]] = {}
    for u in items:
        groups.setdefault(u.group, []).append(u.name)
    return "; ".join(f"group {g}: {', '.join(names)}" for g, names in groups.items())


def refuse_partial(items: list[Untranslated], origin: str, destination: str, allow_partial: bool, hint: str = "") -> None:
    """ConnectError naming every group and partition left without translation, unless ``allow_partial``."""
    risky = blocking(items)
    if risky and not allow_partial:
        raise ConnectError(f"no translation on {destination} for {len(risky)} partition(s) with a position on "
                           f"{origin}: {by_group(risky)}; a consumer would start them at auto.offset.reset (see "
                           f"the plan above){hint}; {ALLOW_PARTIAL} moves the rest; nothing was changed")


def report_partial(items: list[Untranslated], destination: str) -> None:
    """After an ``--allow-partial`` move: say which partitions were left."""
    risky = blocking(items)
    if risky:
        print(f"left without translation on {destination} ({ALLOW_PARTIAL}; a consumer starts them at "
              f"auto.offset.reset): {by_group(risky)}")
