"""Fault-injection scenarios: a MirrorSource flow A->B under load, a fault, and a count of the damage.

Each scenario runs a ``mirrorline distributed`` worker group (real processes, internal topics
on the target as MM2 keeps them) mirroring topics of cluster A to cluster B while a
:class:`~support.faults.LoadGenerator` writes to A, injects its fault, waits for
the mirror to catch up and counts, with confluent-kafka, what was lost and duplicated.
Every scenario prints one table row and adds it to a summary printed at the end of the run
(by tests/conftest.py, which sees every process's reports).

Slow scenarios (``faults_slow``: broker and worker crashes, ~1 min each) are skipped unless
selected with ``-m faults_slow`` or ``MIRRORLINE_FAULTS=all`` (what ``scripts/faults`` sets).
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor

import pytest

from fault_scenario import FLUSH_MS, HEADER, Clusters, Scenario
from support.summary import SUMMARY_ROW
from support.distributed import WorkerCluster


SECTION = "fault scenarios: records lost / duplicated"


# -- selection and reporting ---------------------------------------------------------------

def _slow_selected(config: pytest.Config) -> bool:
    if os.environ.get("MIRRORLINE_FAULTS", "").lower() in ("all", "1", "slow", "yes"):
        return True
    expression = config.getoption("markexpr", "") or ""
    return "faults_slow" in expression and "not faults_slow" not in expression


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the slow fault scenarios unless they were asked for."""
    if _slow_selected(config):
        return
    skip = pytest.mark.skip(reason="slow fault scenario: run scripts/faults, -m faults_slow or MIRRORLINE_FAULTS=all")
    for item in items:
        if item.get_closest_marker("faults_slow") is not None:
            item.add_marker(skip)


@pytest.fixture
def fault_report(request):
    """``fault_report(row)``: print a scenario's row now and in the end-of-run summary.

    The row travels in the test's report (``user_properties``), so the summary printed by
    tests/conftest.py has it also when pytest-xdist ran the scenario in another process.
    """
    def add(row: str) -> None:
        print(f"\n{HEADER}\n{row}")
        request.node.user_properties.append((SUMMARY_ROW, (SECTION, HEADER, row)))
    return add


# -- clusters ------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def breakable_clusters(local_kafka) -> Clusters:
    """Two clusters of their own (``FA``, ``FB``) for scenarios that kill or stop brokers.

    The session's ``A`` and ``B`` are shared with every other test; killing them would make a
    failure here cascade. These two are restarted if a scenario leaves one down, and stopped
    at the end of the session.
    """
    source, target = local_kafka.start(["FA", "FB"])
    yield Clusters(source.spec, target.spec, source, target)
    local_kafka.stop(["FA", "FB"])


@pytest.fixture
def broken_clusters(breakable_clusters):
    """``breakable_clusters``, made whole again (started, not stopped) after the test."""
    yield breakable_clusters
    clusters = (breakable_clusters.source_cluster, breakable_clusters.target_cluster)
    for cluster in clusters:
        pid = cluster.pid()
        if pid is not None:
            os.kill(pid, signal.SIGCONT)  # harmless unless a failed test left it stopped
    with ThreadPoolExecutor(max_workers=len(clusters)) as pool:  # side by side, as LocalKafka.start does
        for started in [pool.submit(cluster.start) for cluster in clusters]:
            started.result()


@pytest.fixture
def shared_clusters(cluster_a, cluster_b) -> Clusters:
    """The session's clusters A and B, for scenarios that leave the brokers alone."""
    return Clusters(cluster_a, cluster_b)


@pytest.fixture
def scenario(request, unique_name, tmp_path):
    """``scenario(label, clusters, workers=1)``: a Scenario with a started worker group on the target.

    Loads are stopped and workers are stopped at the end; worker logs are printed on failure.
    """
    made: list[Scenario] = []

    def make(label: str, clusters: Clusters, workers: int = 1) -> Scenario:
        group = WorkerCluster(clusters.target.bootstrap_servers, unique_name("faults"), tmp_path,
                              {"offset.flush.interval.ms": str(FLUSH_MS)})
        for _ in range(workers):
            group.add_worker()
        made.append(Scenario(label, clusters, group, unique_name("f"), unique_name("mirror")))
        return made[-1]

    yield make
    for item in made:
        item.close()
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            print(item.workers.logs()[-8000:])


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call = report
    return report
