"""The fast fetch plan decides what aiokafka's own ``_get_actions_per_node`` decides, branch by branch.

Both run over the same real aiokafka objects (an ``Assignment`` with its partition states, a
``ClusterMetadata``): partitions with records still buffered (in and past their backoff), on a node
with a fetch in flight, without a known leader, awaiting a position reset, paused, fetchable, and
with a KIP-392 preferred read replica. A release of aiokafka that changes the original's decisions
fails here.
"""

import time
import types

import pytest
from aiokafka.cluster import ClusterMetadata
from aiokafka.consumer.fetcher import Fetcher
from aiokafka.consumer.subscription_state import Assignment
from aiokafka.structs import BrokerMetadata, PartitionMetadata, TopicPartition

from mirrorline.clients.fetch_planner import plan_actions, use_fast_plans


class _Buffered:
    """A fetched-records entry of aiokafka's ``_records`` with a fixed backoff left."""

    def __init__(self, left: float):
        self.left = left

    def calculate_backoff(self) -> float:
        return self.left


def _fetcher(leaders: dict[TopicPartition, int]):
    cluster = ClusterMetadata()
    cluster._brokers = {n: BrokerMetadata(n, "localhost", 9000 + n, None) for n in (1, 2, 3)}
    partitions: dict = {}
    for tp, leader in leaders.items():
        partitions.setdefault(tp.topic, {})[tp.partition] = PartitionMetadata(tp.topic, tp.partition, leader,
                                                                               [leader], [leader], None)
    cluster._partitions = partitions
    fetcher = types.SimpleNamespace(
        _records={}, _in_flight=set(), _preferred_read_replica={}, _client=types.SimpleNamespace(cluster=cluster),
        _max_partition_fetch_bytes=1024, _fetch_max_wait_ms=500, _fetch_min_bytes=1, _fetch_max_bytes=4096,
        _isolation_level=0, _fetcher_timeout=0.2, _client_rack=None, _preferred_replica_ttl=60)
    fetcher._select_read_replica = types.MethodType(Fetcher._select_read_replica, fetcher)
    return fetcher


def _decisions(result):
    fetch_requests, awaiting_reset, timeout, invalid, resume = result
    fetches = {node: sorted((topic, p, offset) for topic, parts in request._topics for p, offset, _ in parts)
               for node, request in fetch_requests}
    resets = {node: sorted(tps) for node, tps in awaiting_reset.items()}
    return fetches, resets, timeout, invalid, len(resume)


def _scenario(preferred: bool):
    tps = [TopicPartition(f"t{i}", p) for i in range(6) for p in range(3)]
    leaders = {tp: 1 + (i % 3) for i, tp in enumerate(tps)}
    leaders[tps[4]] = -1  # leader unavailable
    del leaders[tps[5]]  # unknown to the metadata
    fetcher = _fetcher(leaders)
    assignment = Assignment(tps)
    for i, tp in enumerate(tps):
        if i not in (10, 17):  # two partitions (on nodes 2 and 3) still await their position reset
            assignment.state_value(tp).seek(100 + i)
    assignment.state_value(tps[6]).pause()
    assignment.state_value(tps[9]).pause()
    fetcher._records[tps[1]] = _Buffered(0.05)  # node 2 backs off: no fetch to it
    fetcher._records[tps[12]] = _Buffered(0)  # past its backoff: skipped, no backoff
    fetcher._in_flight.add(3)
    if preferred:
        fetcher._preferred_read_replica[tps[0]] = (3, time.monotonic() + 60)  # in flight: skipped
        fetcher._preferred_read_replica[tps[15]] = (2, time.monotonic() - 1)  # expired: the leader again
    return fetcher, assignment


@pytest.mark.parametrize("preferred", [False, True], ids=["leaders", "preferred-replicas"])
async def test_fast_plan_decides_as_aiokafka_does(preferred):
    fetcher, assignment = _scenario(preferred)
    expected = _decisions(Fetcher._get_actions_per_node(fetcher, assignment))
    fetcher_again, assignment_again = _scenario(preferred)
    got = _decisions(plan_actions(fetcher_again, assignment_again))
    assert got == expected
    fetches, resets, timeout, invalid, resumes = got
    assert fetches and resets and invalid and resumes == 2  # every branch was taken
    assert timeout == pytest.approx(0.05)


async def test_groups_follow_metadata_and_assignment_changes():
    fetcher, assignment = _scenario(preferred=False)
    fetcher._records.clear()
    fetcher._in_flight.clear()
    for tp in assignment.tps:
        assignment.state_value(tp).seek(5)
    first = _decisions(plan_actions(fetcher, assignment))
    assert first == _decisions(plan_actions(fetcher, assignment))  # from the cached groups
    # a metadata update replaces aiokafka's partitions map: every partition now on node 2
    cluster = fetcher._client.cluster
    cluster._partitions = {topic: {p: meta._replace(leader=2) for p, meta in parts.items()}
                           for topic, parts in cluster._partitions.items()}
    fetches, *_ = _decisions(plan_actions(fetcher, assignment))
    assert set(fetches) == {2}
    expected = _decisions(Fetcher._get_actions_per_node(fetcher, assignment))
    assert _decisions(plan_actions(fetcher, assignment)) == expected
    smaller = Assignment([TopicPartition("t0", 0)])
    smaller.state_value(TopicPartition("t0", 0)).seek(7)
    assert _decisions(plan_actions(fetcher, smaller))[0] == {2: [("t0", 0, 7)]}


def test_use_fast_plans_refuses_a_stand_in():
    assert use_fast_plans(object()) is False


def test_an_answered_fetch_request_is_narrowed_to_the_answered_partitions():
    """aiokafka maps the partitions of the request it sent before reading the answer: under a
    session only the answered ones are left for it (:func:`fetch_sessions.answered_only`)."""
    from aiokafka.protocol.fetch import FetchRequest

    from mirrorline.clients.fetch_sessions import answered_only

    topics = [("a", [(0, 10, 99), (1, 20, 99)]), ("b", [(0, 30, 99)])]
    wanted = dict(topics)
    request = FetchRequest(500, 1, 1000, 0, list(topics))
    answer = types.SimpleNamespace(topics=[("a", [(1, 0, 25, b"")])])
    answered_only(request, answer, wanted)
    assert request.topics == [("a", [(1, 20, 99)])]

    request = FetchRequest(500, 1, 1000, 0, list(topics))
    answered_only(request, types.SimpleNamespace(topics=[("c", [(0, 0, 5, b"")])]), wanted)
    assert request.topics == topics  # an answer for a partition never asked for: left alone


async def test_prefetch_is_bounded_by_fetch_max_bytes():
    """Records fetched ahead of the caller stay under fetch.max.bytes (4096 here): a full buffer
    sends no fetch, a partly full one asks for what is left, paused partitions do not count."""
    fetcher, assignment = _scenario(preferred=False)
    fetcher._in_flight.clear()
    fetcher._records.clear()
    for tp in assignment.tps:
        assignment.state_value(tp).seek(1)
    tps = sorted(assignment.tps)
    fetcher._mirrorline_fetched_bytes = sizes = {}

    fetcher._records[tps[0]] = _Buffered(0)
    sizes[(tps[0].topic, tps[0].partition)] = 1000
    requests, *_ = plan_actions(fetcher, assignment)
    assert requests and {request._max_bytes for _node, request in requests} == {4096 - 1000}

    fetcher._records[tps[1]] = _Buffered(0)
    sizes[(tps[1].topic, tps[1].partition)] = 3096
    requests, resets, timeout, *_ = plan_actions(fetcher, assignment)
    assert requests == [] and timeout == fetcher._fetcher_timeout  # woken again by the caller's drain

    assignment.state_value(tps[1]).pause()  # its records cannot be drained: not counted
    requests, *_ = plan_actions(fetcher, assignment)
    assert requests and {request._max_bytes for _node, request in requests} == {4096 - 1000}


async def test_the_plan_is_kept_and_only_the_topics_that_changed_are_made_again():
    """Idle, each plan for a node hands back the same lists (so the fetch session compares them
    at a glance); a moved position makes that partition's topic again and no other; a pause, a
    reset or buffered records give the decisions aiokafka's own method gives."""
    fetcher, assignment = _scenario(preferred=False)
    fetcher._in_flight.clear()
    fetcher._records.clear()
    for tp in assignment.tps:
        assignment.state_value(tp).seek(7)
        assignment.state_value(tp).resume()

    def plan():
        requests, *_ = plan_actions(fetcher, assignment)
        return {node: dict(request._topics) for node, request in requests}

    def agrees():
        return _decisions(plan_actions(fetcher, assignment)) == _decisions(
            Fetcher._get_actions_per_node(fetcher, assignment))

    first, second = plan(), plan()
    assert first == second and first
    assert all(first[node][topic] is second[node][topic] for node in first for topic in first[node])

    tp = sorted(assignment.tps)[0]
    node = fetcher._client.cluster._partitions[tp.topic][tp.partition].leader
    assignment.state_value(tp).seek(9)
    moved = plan()
    assert (tp.partition, 9, 1024) in moved[node][tp.topic] and agrees()
    assert all(moved[n][topic] is first[n][topic] for n in first for topic in first[n] if topic != tp.topic)

    assignment.state_value(tp).pause()
    assert agrees()
    assignment.state_value(tp).resume()
    assignment.state_value(tp).await_reset(1)
    assert agrees()
    assignment.state_value(tp).seek(9)
    fetcher._records[tp] = _Buffered(0)
    assert agrees()
    del fetcher._records[tp]
    assert plan() == moved and agrees()


def test_every_change_aiokafka_makes_to_a_position_or_pause_is_tracked():
    """The kept plan relies on TopicPartitionState changing ``_position`` and ``_paused`` only in
    the methods fetch_planner wraps; an aiokafka release that adds another place fails here."""
    import ast
    import inspect
    import textwrap

    from aiokafka.consumer.subscription_state import TopicPartitionState

    from mirrorline.clients import fetch_planner

    fetch_planner.track_state_changes()
    tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.getmodule(TopicPartitionState))))
    cls = next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == "TopicPartitionState")
    writers = set()
    for method in cls.body:
        if isinstance(method, ast.FunctionDef):
            for node in ast.walk(method):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                        and node.attr in ("_position", "_paused"):
                    writers.add(method.name)
    assert writers - {"__init__"} == set(fetch_planner._TRACKED)
    for name in fetch_planner._TRACKED:
        assert getattr(getattr(TopicPartitionState, name), fetch_planner._TRACKING_MARKER, False)
