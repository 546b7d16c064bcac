"""When a MirrorSource refresh checks the remote topics on the target (connector.py's docstring).

A refresh that finds the source unchanged describes the remote topics only every
min(3 refresh intervals, 30 s), or at once when the last check found one missing or short, or
raised; a change on the source is checked (and re-split) at once. The admin calls are replaced by
counting fakes and the connector's clock by a settable one; the real behaviour against brokers is
covered by tests/integration/mirror/test_source_anomalies.py (a remote topic deleted on the target
is re-created at a 2 s refresh).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mirrorline.connectors.mirror_client.policies import DefaultReplicationPolicy
from mirrorline.connectors.source_mirror import connector as module


class Harness:
    def __init__(self, monkeypatch, refresh_s: float):
        self.now = 1000.0
        self.source = {"orders": 3}
        self.missing: set[str] = set()
        self.checks: list[dict[str, int]] = []
        self.fail_next = False
        self.resplits = 0
        monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: self.now))
        monkeypatch.setattr(module, "source_topics", self._source_topics)
        monkeypatch.setattr(module, "create_remote_topics", self._create_remote_topics)
        connector = module.MirrorSourceConnector()
        connector.config = {"replication.factor": 1, "refresh.topics.interval.seconds": refresh_s}
        connector.topics, connector._next_remote_check = {}, 0.0
        connector.source_admin = connector.target_admin = connector.selection = connector.config_filter = None
        connector.source_alias, connector.policy, connector.history_handoff = "A", DefaultReplicationPolicy(), None

        async def no_stored_selection():
            return None

        connector._apply_stored_selection = no_stored_selection
        connector.context = SimpleNamespace(name="flow", request_task_reconfiguration=self._resplit)
        self.connector = connector

    async def _source_topics(self, admin, selection):
        return dict(self.source)

    async def _create_remote_topics(self, source, target, alias, policy, topics, rf, config_filter):
        self.checks.append(dict(topics))
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("target unreachable")
        return {f"A.{t}": n for t, n in topics.items() if t not in self.missing}

    def _resplit(self):
        self.resplits += 1

    async def refresh(self, after_s: float) -> None:
        self.now += after_s
        await self.connector._refresh()


async def test_unchanged_refreshes_check_the_target_every_30_s_at_a_10_s_refresh(monkeypatch):
    h = Harness(monkeypatch, refresh_s=10)
    await h.connector._refresh(initial=True)
    assert len(h.checks) == 1
    for _ in range(2):
        await h.refresh(10)
    assert len(h.checks) == 1  # 10 and 20 s later: nothing changed, nothing checked
    await h.refresh(10)
    assert len(h.checks) == 2  # 30 s after the last check
    h.source["payments"] = 2
    await h.refresh(10)
    assert len(h.checks) == 3 and h.checks[-1] == {"orders": 3, "payments": 2}  # a change: at once
    assert h.resplits == 1


async def test_a_missing_remote_topic_or_a_failed_check_is_checked_again_at_the_next_refresh(monkeypatch):
    h = Harness(monkeypatch, refresh_s=10)
    h.missing = {"orders"}
    await h.connector._refresh(initial=True)
    await h.refresh(10)
    assert len(h.checks) == 2  # the last check found it missing
    h.missing = set()
    await h.refresh(10)
    await h.refresh(10)
    assert len(h.checks) == 3  # complete again: back to every 30 s
    h.source["payments"] = 2
    h.fail_next = True
    with pytest.raises(ConnectionError):
        await h.refresh(10)
    assert h.resplits == 0
    await h.refresh(10)  # the change is still seen as a change: checked, and the tasks re-split
    assert len(h.checks) == 5 and h.resplits == 1


async def test_a_short_refresh_interval_checks_every_three_refreshes(monkeypatch):
    h = Harness(monkeypatch, refresh_s=2)
    await h.connector._refresh(initial=True)
    for _ in range(6):
        await h.refresh(2)
    assert len(h.checks) == 3  # at 0, 6 and 12 s
    assert module.remote_check_interval(600) == 30.0
