"""What each worker tells the group, and how the leader shares connectors and tasks among workers.

Pure data and arithmetic, no I/O, so the rules can be tested on their own.

The protocol is incremental, as Kafka Connect's ``sessioned``/``compatible`` protocols are,
carried inside Kafka's group membership protocol:

- every worker joins with a :class:`MemberState`: its REST URL, how far it has read the config
  topic, and the connectors and tasks it owns right now (it keeps running them while the group
  rebalances);
- the leader answers each worker with an :class:`Assignment`. A worker keeps what it owns and
  is assigned, starts what is newly assigned, and stops what it owns but is no longer assigned;
- nothing owned by one live worker is ever given to another in the same round. Moving an item
  takes two rounds: the owner is first told to let it go (``revoked``); once it has stopped it,
  it rejoins, and the next round gives the now free item to its new worker. So no connector or
  task runs on two workers at once, and a rebalance leaves alone everything it does not move.

Bulk jobs (``POST /jobs``) are shared the same way, as a third kind of work: each job that
has not finished runs on one worker, balanced and sticky, and moves in two rounds like a task
(its owner stops it, then another worker runs it again and it resumes). Workers that predate
jobs send no ``jobs`` and get none.

Balance: connectors and tasks are balanced separately; every worker ends with ``n // w`` or
``n // w + 1`` of each, and each connector's tasks are spread as evenly as that allows. Workers
keep as much of what they own as the balance allows (sticky), so adding a worker moves only the
items the newcomer needs, and losing one moves only its own.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field

#: Version of the JSON carried in the group protocol's user data.
PROTOCOL_VERSION = 1

#: ``Assignment.error`` when the leader's view of the config topic is older than a member's.
CONFIG_MISMATCH = "config_mismatch"

TaskKey = tuple[str, int]


@dataclass(frozen=True)
class MemberState:
    """A worker's join metadata: where its REST API is, its config-topic offset, and what it owns."""

    url: str
    config_offset: int
    connectors: tuple[str, ...] = ()
    tasks: tuple[TaskKey, ...] = ()
    #: Bulk jobs running on the worker.
    jobs: tuple[str, ...] = ()

    def encode(self) -> bytes:
        """The JSON bytes sent as the member's protocol user data."""
        return json.dumps({"version": PROTOCOL_VERSION, "url": self.url, "config_offset": self.config_offset,
                           "connectors": sorted(self.connectors), "tasks": [list(t) for t in sorted(self.tasks)],
                           "jobs": sorted(self.jobs)},
                          separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> MemberState:
        """Parse :meth:`encode`'s bytes; ValueError when they are not a member state."""
        try:
            value = json.loads(data.decode("utf-8"))
            return cls(str(value["url"]), int(value.get("config_offset", -1)),
                       tuple(str(c) for c in _list(value.get("connectors", []))),
                       tuple((str(c), int(t)) for c, t in _list(value.get("tasks", []))),
                       tuple(str(j) for j in _list(value.get("jobs", []))))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a mirrorline member state ({exc!r}): {data[:80]!r}") from None


@dataclass(frozen=True)
class Assignment:
    """The leader's answer to one worker for one generation of the group."""

    leader: str
    leader_url: str
    config_offset: int
    connectors: tuple[str, ...] = ()
    tasks: tuple[TaskKey, ...] = ()
    revoked_connectors: tuple[str, ...] = ()
    revoked_tasks: tuple[TaskKey, ...] = ()
    error: str | None = None
    #: Every member's assigned tasks and connectors (by member URL), for status and debugging.
    workers: Mapping[str, int] = field(default_factory=dict)
    jobs: tuple[str, ...] = ()
    revoked_jobs: tuple[str, ...] = ()

    @property
    def revoked(self) -> bool:
        """Whether this worker must stop something it owns, and then rejoin."""
        return bool(self.revoked_connectors or self.revoked_tasks or self.revoked_jobs)

    def encode(self) -> bytes:
        """The JSON bytes sent as the member's assignment user data."""
        return json.dumps({
            "version": PROTOCOL_VERSION, "leader": self.leader, "leader_url": self.leader_url,
            "config_offset": self.config_offset, "connectors": list(self.connectors),
            "tasks": [list(t) for t in self.tasks], "revoked_connectors": list(self.revoked_connectors),
            "revoked_tasks": [list(t) for t in self.revoked_tasks], "error": self.error,
            "workers": dict(self.workers), "jobs": list(self.jobs), "revoked_jobs": list(self.revoked_jobs)},
            separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> Assignment:
        """Parse :meth:`encode`'s bytes; ValueError when they are not an assignment."""
        try:
            value = json.loads(data.decode("utf-8"))
            workers = value.get("workers", {})
            if not isinstance(workers, dict):
                raise TypeError("workers is not an object")
            return cls(str(value["leader"]), str(value["leader_url"]), int(value["config_offset"]),
                       tuple(str(c) for c in _list(value.get("connectors", []))),
                       tuple((str(c), int(t)) for c, t in _list(value.get("tasks", []))),
                       tuple(str(c) for c in _list(value.get("revoked_connectors", []))),
                       tuple((str(c), int(t)) for c, t in _list(value.get("revoked_tasks", []))),
                       value.get("error"), {str(k): int(v) for k, v in workers.items()},
                       tuple(str(j) for j in _list(value.get("jobs", []))),
                       tuple(str(j) for j in _list(value.get("revoked_jobs", []))))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a mirrorline assignment ({exc!r}): {data[:80]!r}") from None


def _list(value: object) -> list:
    """``value`` if it is a JSON array; TypeError otherwise (a string is not a list of names)."""
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def balanced_sticky(members: Mapping[str, Iterable], items: Iterable, group: Callable[[object], Hashable] | None = None
                    ) -> tuple[dict[str, list], dict[str, list]]:
    """Share ``items`` among ``members`` (member -> items it owns now); returns ``(assigned, revoked)``.

    - An owned item that still exists stays with its owner unless the owner holds more than its
      share; the surplus (and any item two members both claim, beyond the first claimant) is
      revoked from that owner and given to nobody this round.
    - Items nobody owns go to the members furthest below their share.
    - Shares are ``n // w`` or ``n // w + 1``; the larger shares go to the members owning most,
      so as little as possible moves.
    - With ``group`` (item -> its group, e.g. a task's connector), each group's items are spread
      too, within those rules: an owner over its share gives up items of the groups it holds most
      of beyond their fair share (``group size / w``), and a free item goes to a member with room
      holding the fewest of its group. So a worker that ran everything when a second one joins
      gives it half of *each* connector's tasks, not whichever tasks sort last (all of one
      connector's).
    """
    all_items = sorted(set(items))
    names = sorted(members)
    if not names:
        return {}, {}
    existing = set(all_items)
    claimed: set = set()
    owned: dict[str, list] = {}
    revoked: dict[str, list] = {m: [] for m in names}
    for member in names:
        mine = []
        for item in sorted(set(members[member])):
            if item not in existing:
                continue  # deleted: the owner stops it on its own when it reads the config topic
            if item in claimed:
                revoked[member].append(item)  # owned twice: only the first claimant keeps it
            else:
                claimed.add(item)
                mine.append(item)
        owned[member] = mine
    base, extra = divmod(len(all_items), len(names))
    by_ownership = sorted(names, key=lambda m: (-len(owned[m]), m))
    share = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_ownership)}
    assigned: dict[str, list] = {}
    sizes = Counter(group(item) for item in all_items) if group else Counter()
    for member in names:
        kept = list(owned[member])
        while group is not None and len(kept) > share[member]:
            # give up an item of the group this member holds most of, beyond that group's fair share
            held = Counter(group(item) for item in kept)
            worst = max(held, key=lambda g: (held[g] - sizes[g] / len(names), held[g], str(g)))
            kept.remove(max(item for item in kept if group(item) == worst))
        assigned[member] = kept[:share[member]]
        keeps = set(assigned[member])
        revoked[member].extend(item for item in owned[member] if item not in keeps)
    free = [item for item in all_items if item not in claimed]
    for item in free:
        room = [m for m in names if len(assigned[m]) < share[m]]
        member = min(room, key=lambda m: (_same_group(assigned[m], item, group), len(assigned[m]) - share[m],
                                          len(assigned[m]), m))
        assigned[member].append(item)
    return assigned, revoked


def _same_group(items: list, item: object, group: Callable[[object], Hashable] | None) -> int:
    """How many of ``items`` are in ``item``'s group (0 without groups)."""
    return 0 if group is None else sum(group(other) == group(item) for other in items)


def assign(members: Mapping[str, MemberState], leader: str, connectors: Iterable[str],
           task_counts: Mapping[str, int], config_offset: int, jobs: Iterable[str] = ()) -> dict[str, Assignment]:
    """The leader's assignment for every member.

    ``connectors`` and ``task_counts`` are the leader's view of the config topic read up to
    ``config_offset``; ``jobs`` the bulk jobs that have not finished. A member that has read
    further gets an assignment with ``error=CONFIG_MISMATCH`` (as does everyone), and all
    rejoin after catching up.
    """
    leader_url = members[leader].url
    if any(state.config_offset > config_offset for state in members.values()):
        return {m: Assignment(leader, leader_url, config_offset, error=CONFIG_MISMATCH) for m in members}
    connector_list = sorted(set(connectors))
    tasks = [(c, i) for c in connector_list for i in range(task_counts.get(c, 0))]
    connectors_of, revoked_connectors = balanced_sticky({m: s.connectors for m, s in members.items()},
                                                        connector_list)
    tasks_of, revoked_tasks = balanced_sticky({m: s.tasks for m, s in members.items()}, tasks,
                                              group=lambda task: task[0])  # each connector's tasks spread
    jobs_of, revoked_jobs = balanced_sticky({m: s.jobs for m, s in members.items()}, set(jobs))
    workers = {members[m].url: len(connectors_of[m]) + len(tasks_of[m]) + len(jobs_of[m]) for m in members}
    return {m: Assignment(leader, leader_url, config_offset, tuple(connectors_of[m]), tuple(tasks_of[m]),
                          tuple(revoked_connectors[m]), tuple(revoked_tasks[m]), None, workers,
                          tuple(jobs_of[m]), tuple(revoked_jobs[m]))
            for m in members}
