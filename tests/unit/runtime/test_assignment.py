"""Unit tests of mirrorline.runtime.distributed.assignment: the worker protocol's JSON and the
leader's balanced, sticky, two-rounds-to-move sharing of connectors and tasks."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from mirrorline.runtime.distributed.assignment import (
    CONFIG_MISMATCH,
    PROTOCOL_VERSION,
    Assignment,
    MemberState,
    assign,
    balanced_sticky,
)


def tasks(connector: str, *indices: int) -> list[tuple[str, int]]:
    """Task keys of ``connector`` with the given indices."""
    return [(connector, i) for i in indices]


def next_round(assigned: dict[str, list]) -> dict[str, list]:
    """What every member owns when it rejoins: it dropped what was revoked and started what was
    assigned, so it owns exactly its assignment."""
    return {m: list(items) for m, items in assigned.items()}


def first_claimants(members: dict[str, list], items) -> dict[str, list]:
    """Each member's existing items, an item counting only for the first member (sorted id) claiming it."""
    existing, claimed, out = set(items), set(), {}
    for m in sorted(members):
        out[m] = sorted(i for i in set(members[m]) if i in existing and i not in claimed)
        claimed.update(out[m])
    return out


def minimum_surplus(owned: dict[str, list], n: int) -> int:
    """Fewest owned items any balanced outcome must take from their owners (brute force over which
    members get the ``n // w + 1`` shares)."""
    names = sorted(owned)
    base, extra = divmod(n, len(names))
    return min(sum(max(0, len(owned[m]) - base - (m in big)) for m in names)
               for big in map(set, itertools.combinations(names, extra)))


# --- the protocol's JSON --------------------------------------------------------------------------


def test_member_state_round_trip():
    """A MemberState survives encode/decode unchanged."""
    state = MemberState("http://w1:8083", 42, ("a", "b"), (("a", 0), ("a", 1), ("b", 3)))
    assert MemberState.decode(state.encode()) == state


def test_member_state_round_trip_defaults():
    """A MemberState owning nothing survives encode/decode."""
    state = MemberState("http://w1:8083", -1)
    assert MemberState.decode(state.encode()) == state


def test_member_state_encoding_is_canonical():
    """Connectors and tasks are sorted in the JSON, which carries the protocol version."""
    state = MemberState("u", 7, ("b", "a"), (("b", 1), ("a", 2), ("a", 0)))
    assert json.loads(state.encode()) == {
        "version": PROTOCOL_VERSION, "url": "u", "config_offset": 7,
        "connectors": ["a", "b"], "tasks": [["a", 0], ["a", 2], ["b", 1]], "jobs": []}
    assert MemberState.decode(state.encode()) == MemberState("u", 7, ("a", "b"), (("a", 0), ("a", 2), ("b", 1)))


def test_member_state_of_a_worker_predating_jobs_owns_no_job():
    """Metadata without ``jobs`` (a worker that predates them) decodes as owning none."""
    data = json.dumps({"version": 1, "url": "u", "config_offset": 3, "connectors": ["a"], "tasks": []}).encode()
    assert MemberState.decode(data) == MemberState("u", 3, ("a",), (), ())
    job_owner = MemberState("u", 3, (), (), ("bf-2", "bf-1"))
    assert MemberState.decode(job_owner.encode()) == MemberState("u", 3, (), (), ("bf-1", "bf-2"))


def test_jobs_are_shared_sticky_and_move_in_two_rounds():
    """Jobs are a third kind of work: balanced, kept by their owner, revoked before they move."""
    from mirrorline.runtime.distributed.assignment import assign

    members = {"m1": MemberState("u1", 5, jobs=("j1", "j2", "j3")), "m2": MemberState("u2", 5)}
    first = assign(members, "m1", [], {}, 5, jobs=["j1", "j2", "j3", "j4"])
    # m1 keeps two of its three, gives one up (to nobody this round); m2 gets the free one
    assert len(first["m1"].jobs) == 2 and len(first["m1"].revoked_jobs) == 1 and first["m1"].revoked
    assert first["m2"].jobs == ("j4",)
    moved = first["m1"].revoked_jobs[0]
    assert moved not in first["m2"].jobs
    second = assign({"m1": MemberState("u1", 5, jobs=first["m1"].jobs), "m2": MemberState("u2", 5, jobs=("j4",))},
                    "m1", [], {}, 5, jobs=["j1", "j2", "j3", "j4"])
    assert set(second["m2"].jobs) == {"j4", moved} and set(second["m1"].jobs) == set(first["m1"].jobs)
    # a finished job (no longer listed) is neither assigned nor revoked; a dead owner's job moves at once
    after_death = assign({"m2": MemberState("u2", 5, jobs=second["m2"].jobs)}, "m2", [], {}, 5,
                         jobs=["j1", "j2", "j4"])
    assert set(after_death["m2"].jobs) == {"j1", "j2", "j4"} and not after_death["m2"].revoked_jobs
    assert Assignment.decode(after_death["m2"].encode()) == after_death["m2"]


def test_assignment_round_trip():
    """An Assignment with every field set survives encode/decode unchanged."""
    assignment = Assignment("leader-1", "http://w1:8083", 9, ("a",), (("a", 0), ("b", 2)),
                            ("c",), (("c", 1),), None, {"http://w1:8083": 3, "http://w2:8083": 1})
    decoded = Assignment.decode(assignment.encode())
    assert decoded == assignment
    assert decoded.tasks == (("a", 0), ("b", 2)) and decoded.revoked_tasks == (("c", 1),)


def test_assignment_round_trip_with_error():
    """An error Assignment with default fields survives encode/decode."""
    assignment = Assignment("leader-1", "http://w1:8083", 3, error=CONFIG_MISMATCH)
    assert Assignment.decode(assignment.encode()) == assignment


def test_assignment_revoked_property():
    """``revoked`` is true exactly when some connector or task is revoked."""
    assert not Assignment("l", "u", 0, ("a",), (("a", 0),)).revoked
    assert Assignment("l", "u", 0, revoked_connectors=("a",)).revoked
    assert Assignment("l", "u", 0, revoked_tasks=(("a", 0),)).revoked


GARBAGE = [b"", b"not json", b"\xff\xfe\x00", b"[]", b"null", b"42", b'"text"', b"{}", b'{"other": 1}']


@pytest.mark.parametrize("data", GARBAGE + [b'{"leader": "l", "leader_url": "u", "config_offset": 1}'])
def test_member_state_decode_garbage(data):
    """Bytes that are not a member state raise ValueError."""
    with pytest.raises(ValueError):
        MemberState.decode(data)


@pytest.mark.parametrize("data", GARBAGE + [b'{"url": "u", "config_offset": 1}'])
def test_assignment_decode_garbage(data):
    """Bytes that are not an assignment raise ValueError."""
    with pytest.raises(ValueError):
        Assignment.decode(data)


@pytest.mark.parametrize("cls, data", [
    (MemberState, b'{"url": "u", "config_offset": null}'),
    (MemberState, b'{"url": "u", "tasks": [5]}'),
    (Assignment, b'{"leader": "l"}'),
    (Assignment, b'{"leader": "l", "leader_url": "u", "config_offset": 1, "workers": [1]}'),
])
def test_decode_malformed_fields_raise_value_error(cls, data):
    """A JSON object with the key but malformed fields is still 'not a member state/assignment'."""
    with pytest.raises(ValueError):
        cls.decode(data)


# --- balanced_sticky: exact scenarios --------------------------------------------------------------


def test_no_members():
    """Nobody to share with: nothing assigned, nothing revoked."""
    assert balanced_sticky({}, ["a", "b"]) == ({}, {})


def test_no_items():
    """No items: every member gets an empty list of each."""
    assert balanced_sticky({"a": [], "b": []}, []) == ({"a": [], "b": []}, {"a": [], "b": []})


def test_six_tasks_three_members_from_scratch():
    """One connector's six tasks are shared two per member, all assigned, nothing revoked."""
    items = tasks("conn", *range(6))
    assigned, revoked = balanced_sticky({"w1": [], "w2": [], "w3": []}, items)
    assert {m: len(v) for m, v in assigned.items()} == {"w1": 2, "w2": 2, "w3": 2}
    assert sorted(itertools.chain(*assigned.values())) == items
    assert revoked == {"w1": [], "w2": [], "w3": []}


def test_larger_share_goes_to_the_member_owning_most():
    """5 items for 2 members: the one already owning an item gets the 3-item share, even though the
    other comes first by name."""
    items = [f"i{k}" for k in range(5)]
    assigned, revoked = balanced_sticky({"a": [], "b": ["i0"]}, items)
    assert assigned == {"a": ["i1", "i3"], "b": ["i0", "i2", "i4"]}
    assert revoked == {"a": [], "b": []}


def test_order_of_inputs_does_not_matter():
    """The result depends on the members and items, not on the order they are given in."""
    items = tasks("a", *range(5)) + tasks("b", *range(4))
    members = {"w2": tasks("a", 3, 0), "w1": tasks("b", 2), "w3": []}
    expected = balanced_sticky(members, items)
    shuffled = items[::-1]
    reordered = {"w3": [], "w1": tasks("b", 2), "w2": tasks("a", 0, 3)}
    assert balanced_sticky(reordered, shuffled) == expected


def test_adding_a_member_takes_two_rounds_and_moves_only_the_surplus():
    """A 4th worker joining a balanced 3x2 group: round 1 only revokes the one surplus task (the
    newcomer gets nothing still owned); round 2 hands it to the newcomer and moves nothing else."""
    items = tasks("conn", *range(6))
    owned = {"w1": tasks("conn", 0, 3), "w2": tasks("conn", 1, 4), "w3": tasks("conn", 2, 5), "w4": []}

    assigned, revoked = balanced_sticky(owned, items)
    assert assigned == {"w1": tasks("conn", 0, 3), "w2": tasks("conn", 1, 4), "w3": tasks("conn", 2), "w4": []}
    assert revoked == {"w1": [], "w2": [], "w3": tasks("conn", 5), "w4": []}

    assigned2, revoked2 = balanced_sticky(next_round(assigned), items)
    assert assigned2 == {"w1": tasks("conn", 0, 3), "w2": tasks("conn", 1, 4), "w3": tasks("conn", 2),
                         "w4": tasks("conn", 5)}
    assert revoked2 == {"w1": [], "w2": [], "w3": [], "w4": []}
    moved = sum(1 for m in owned for item in owned[m] if item not in assigned2[m])
    assert moved == minimum_surplus(owned, len(items)) == 1


def test_adding_a_member_to_three_by_four():
    """A 4th worker joining a balanced 3x4 group takes exactly one task from each, over two rounds."""
    items = tasks("conn", *range(12))
    owned = {"w1": tasks("conn", 0, 3, 6, 9), "w2": tasks("conn", 1, 4, 7, 10),
             "w3": tasks("conn", 2, 5, 8, 11), "w4": []}

    assigned, revoked = balanced_sticky(owned, items)
    assert assigned["w4"] == []
    assert {m: len(v) for m, v in revoked.items()} == {"w1": 1, "w2": 1, "w3": 1, "w4": 0}
    for m in ("w1", "w2", "w3"):
        assert sorted(assigned[m] + revoked[m]) == owned[m]

    assigned2, revoked2 = balanced_sticky(next_round(assigned), items)
    assert revoked2 == {"w1": [], "w2": [], "w3": [], "w4": []}
    assert sorted(assigned2["w4"]) == sorted(revoked["w1"] + revoked["w2"] + revoked["w3"])
    for m in ("w1", "w2", "w3"):
        assert assigned2[m] == assigned[m]
        assert len(assigned2[m]) == 3


def test_losing_a_member_reassigns_its_items_in_one_round():
    """A worker that left (nobody reports its items): its items are reassigned at once and the
    others keep everything they had."""
    items = tasks("conn", *range(6))
    owned = {"w1": tasks("conn", 0, 3), "w2": tasks("conn", 1, 4)}  # w3 held 2 and 5, and is gone

    assigned, revoked = balanced_sticky(owned, items)
    assert revoked == {"w1": [], "w2": []}
    assert sorted(assigned["w1"] + assigned["w2"]) == items
    assert {m: len(v) for m, v in assigned.items()} == {"w1": 3, "w2": 3}
    for m in owned:
        assert set(owned[m]) <= set(assigned[m])


def test_duplicate_ownership_first_member_keeps_it():
    """Two members report the same task: the first by sorted id keeps it, the other must revoke it,
    and it is not given to anyone else this round."""
    items = tasks("conn", 0, 1)
    owned = {"w2": tasks("conn", 0), "w1": tasks("conn", 0)}  # dict order is not what decides

    assigned, revoked = balanced_sticky(owned, items)
    assert assigned == {"w1": tasks("conn", 0), "w2": tasks("conn", 1)}
    assert revoked == {"w1": [], "w2": tasks("conn", 0)}


def test_deleted_items_neither_assigned_nor_revoked():
    """Items a member owns that no longer exist are left to the owner: not assigned, not revoked."""
    items = tasks("conn", 0, 1)
    owned = {"w1": tasks("conn", 0, 9) + tasks("gone", 0), "w2": []}

    assigned, revoked = balanced_sticky(owned, items)
    assert assigned == {"w1": tasks("conn", 0), "w2": tasks("conn", 1)}
    assert revoked == {"w1": [], "w2": []}


def test_deleted_items_do_not_count_towards_the_share():
    """An owner of deleted items is not treated as over its share because of them."""
    owned = {"w1": ["a", "x", "y", "z"], "w2": ["b"]}
    assert balanced_sticky(owned, ["a", "b"]) == ({"w1": ["a"], "w2": ["b"]}, {"w1": [], "w2": []})


# --- balanced_sticky: properties over many sizes ---------------------------------------------------


def random_ownership(rng: random.Random, names: list[str], items: list[str]) -> dict[str, list]:
    """Each item owned by no one, one or two random members; some members also own deleted items."""
    owned: dict[str, list] = {m: [] for m in names}
    for item in items:
        for m in rng.sample(names, rng.choice([0, 0, 1, 1, 1, 2]) if len(names) > 1 else rng.choice([0, 1])):
            owned[m].append(item)
    for m in names:
        if rng.random() < 0.2:
            owned[m].append(f"deleted-{m}")
    return owned


SIZES = [(w, n) for w in range(1, 7) for n in range(21)]
SIZE_IDS = [f"{w}members-{n}items" for w, n in SIZES]


@pytest.mark.parametrize("trial", range(3))
@pytest.mark.parametrize("w, n", SIZES, ids=SIZE_IDS)
def test_properties_of_one_round(w, n, trial):
    """For random ownership: at most one member per item, nothing owned goes to anyone else this
    round, only owned items are revoked, every item is assigned or still held pending revocation
    (a surplus item is assigned to nobody), shares stay within n // w + 1 (exactly n // w or
    n // w + 1 when no surplus is revoked), and no more is revoked than duplicates plus the
    minimum surplus."""
    rng = random.Random(1000 * w + 10 * n + trial)
    names = [f"w{i}" for i in range(w)]
    items = [f"item-{i:02d}" for i in range(n)]
    owned = random_ownership(rng, names, items)

    assigned, revoked = balanced_sticky(owned, rng.sample(items, len(items)))

    assert set(assigned) == set(revoked) == set(names)
    everything_assigned = list(itertools.chain(*assigned.values()))
    assert len(everything_assigned) == len(set(everything_assigned))  # at most one member per item
    assert set(everything_assigned) <= set(items)  # deleted items never assigned
    for m in names:
        assert set(revoked[m]) <= set(owned[m]) & set(items)  # only existing owned items are revoked
        assert not set(revoked[m]) & set(assigned[m])
        for item in assigned[m]:
            owners = sorted(o for o in names if item in owned[o])
            assert not owners or owners[0] == m  # two rounds to move: never given away while owned
    held_pending = {item for m in names for item in revoked[m]}
    assert set(everything_assigned) | held_pending == set(items)
    first = first_claimants(owned, items)
    surplus = {item for m in names for item in revoked[m] if item in first[m]}
    assert not set(everything_assigned) & surplus  # taken from its owner, given to nobody yet

    base = n // w
    counts = sorted(len(assigned[m]) for m in names)
    assert counts[-1] <= base + 1
    if not surplus:
        assert counts == [base] * (w - n % w) + [base + 1] * (n % w)

    duplicates = sum(max(0, sum(item in owned[m] for m in names) - 1) for item in items)
    minimum = minimum_surplus(first, n)
    assert sum(len(v) for v in revoked.values()) == duplicates + minimum


@pytest.mark.parametrize("trial", range(3))
@pytest.mark.parametrize("w, n", SIZES, ids=SIZE_IDS)
def test_second_round_settles(w, n, trial):
    """Once owners have dropped what was revoked, the next round revokes nothing, keeps every
    member's items where they are, and gives each member exactly n // w or n // w + 1."""
    rng = random.Random(1000 * w + 10 * n + trial)
    names = [f"w{i}" for i in range(w)]
    items = [f"item-{i:02d}" for i in range(n)]
    assigned, _ = balanced_sticky(random_ownership(rng, names, items), items)

    assigned2, revoked2 = balanced_sticky(next_round(assigned), items)

    assert revoked2 == {m: [] for m in names}
    assert sorted(itertools.chain(*assigned2.values())) == items
    for m in names:
        assert set(assigned[m]) <= set(assigned2[m])
    counts = sorted(len(v) for v in assigned2.values())
    assert counts == [n // w] * (w - n % w) + [n // w + 1] * (n % w)


@pytest.mark.parametrize("w", range(2, 7))
@pytest.mark.parametrize("n", range(21))
def test_membership_changes_from_a_balanced_state(w, n):
    """From a settled, balanced state: losing a member moves only its items, in one round; gaining
    one revokes exactly the minimum surplus and never touches anything that stays."""
    names = [f"w{i}" for i in range(w)]
    items = [f"item-{i:02d}" for i in range(n)]
    balanced, _ = balanced_sticky({m: [] for m in names}, items)

    lost = dict(balanced)
    gone = lost.pop(names[-1])
    assigned, revoked = balanced_sticky(lost, items)
    assert revoked == {m: [] for m in lost}
    for m in lost:
        assert set(balanced[m]) <= set(assigned[m])
    assert sorted(itertools.chain(*assigned.values())) == items
    assert sorted(set(itertools.chain(*assigned.values())) - set(itertools.chain(*lost.values()))) == sorted(gone)

    joined = {**balanced, "w9": []}
    assigned, revoked = balanced_sticky(joined, items)
    assert assigned["w9"] == []
    assert sum(len(v) for v in revoked.values()) == minimum_surplus(joined, n) == n // (w + 1)
    for m in names:
        assert sorted(assigned[m] + revoked[m]) == sorted(balanced[m])


# --- assign ----------------------------------------------------------------------------------------


def state(name: str, offset: int = 10, connectors=(), owned_tasks=()) -> MemberState:
    """A member state whose URL is ``http://<name>:8083``."""
    return MemberState(f"http://{name}:8083", offset, tuple(connectors), tuple(owned_tasks))


def test_assign_config_mismatch_for_everyone():
    """A member ahead of the leader's config offset: every member gets CONFIG_MISMATCH and nothing else."""
    members = {"m1": state("m1", 10, ["a"], tasks("a", 0)), "m2": state("m2", 11), "m3": state("m3", 3)}
    result = assign(members, "m1", ["a"], {"a": 1}, 10)
    expected = Assignment("m1", "http://m1:8083", 10, error=CONFIG_MISMATCH)
    assert result == {"m1": expected, "m2": expected, "m3": expected}
    assert all(not a.connectors and not a.tasks and not a.revoked and a.workers == {} for a in result.values())


def test_assign_same_or_older_offsets_are_not_a_mismatch():
    """Members at or behind the leader's config offset get a normal assignment."""
    members = {"m1": state("m1", 10), "m2": state("m2", 10), "m3": state("m3", 2)}
    result = assign(members, "m1", ["a"], {"a": 2}, 10)
    assert all(a.error is None for a in result.values())


def test_assign_from_scratch():
    """Tasks come from task_counts, connectors and tasks are shared separately, and every
    assignment carries the leader, its URL, the config offset and the per-URL workload."""
    members = {"m1": state("m1"), "m2": state("m2")}
    result = assign(members, "m2", ["y", "x", "x"], {"x": 2, "y": 3, "not-a-connector": 4}, 10)

    assert set(result) == {"m1", "m2"}
    assert sorted(result["m1"].connectors + result["m2"].connectors) == ["x", "y"]
    assert len(result["m1"].connectors) == len(result["m2"].connectors) == 1
    assert sorted(result["m1"].tasks + result["m2"].tasks) == tasks("x", 0, 1) + tasks("y", 0, 1, 2)
    assert sorted([len(result["m1"].tasks), len(result["m2"].tasks)]) == [2, 3]
    workers = {"http://m1:8083": 1 + len(result["m1"].tasks), "http://m2:8083": 1 + len(result["m2"].tasks)}
    for a in result.values():
        assert (a.leader, a.leader_url, a.config_offset, a.error) == ("m2", "http://m2:8083", 10, None)
        assert not a.revoked
        assert a.workers == workers
    assert sum(workers.values()) == 2 + 5


def test_assign_connector_without_task_count_has_no_tasks():
    """A connector missing from task_counts (or with count 0) is assigned but has no tasks."""
    result = assign({"m1": state("m1")}, "m1", ["a", "b", "c"], {"b": 0, "c": 1}, 10)
    assert result["m1"].connectors == ("a", "b", "c")
    assert result["m1"].tasks == (("c", 0),)
    assert result["m1"].workers == {"http://m1:8083": 4}


def test_assign_balances_connectors_and_tasks_separately():
    """m1 owns both connectors and m2 both tasks: 2 items each overall, but each kind is balanced
    on its own, so m1 must revoke a connector and m2 a task."""
    members = {"m1": state("m1", connectors=["x", "y"]), "m2": state("m2", owned_tasks=tasks("x", 0, 1))}
    result = assign(members, "m1", ["x", "y"], {"x": 2}, 10)

    assert (result["m1"].connectors, result["m1"].revoked_connectors) == (("x",), ("y",))
    assert (result["m1"].tasks, result["m1"].revoked_tasks) == ((), ())
    assert (result["m2"].connectors, result["m2"].revoked_connectors) == ((), ())
    assert (result["m2"].tasks, result["m2"].revoked_tasks) == ((("x", 0),), (("x", 1),))
    assert result["m1"].workers == {"http://m1:8083": 1, "http://m2:8083": 1}


def test_assign_keeps_owned_and_revokes_duplicates_and_round_trips():
    """What members own stays put, a doubly owned task is revoked from the second claimant, and
    every assignment survives encode/decode."""
    members = {"m1": state("m1", connectors=["a"], owned_tasks=tasks("a", 0, 1)),
               "m2": state("m2", connectors=["b"], owned_tasks=tasks("a", 1) + tasks("b", 0))}
    result = assign(members, "m1", ["a", "b"], {"a": 2, "b": 2}, 10)

    workers = {"http://m1:8083": 3, "http://m2:8083": 3}
    assert result["m1"] == Assignment("m1", "http://m1:8083", 10, ("a",), (("a", 0), ("a", 1)),
                                      (), (), None, workers)
    assert result["m2"] == Assignment("m1", "http://m1:8083", 10, ("b",), (("b", 0), ("b", 1)),
                                      (), (("a", 1),), None, workers)
    for a in result.values():
        assert Assignment.decode(a.encode()) == a
