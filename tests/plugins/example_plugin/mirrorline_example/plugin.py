"""The plugin module named by the ``mirrorline`` entry point: it only declares what it provides."""

from __future__ import annotations

from mirrorline.api import hookimpl

from mirrorline_example.sequence import SequenceSourceConnector
from mirrorline_example.steps import StepsJob


@hookimpl
def register_connectors() -> list[type]:
    """The connectors of this plugin: ``SequenceSourceConnector``."""
    return [SequenceSourceConnector]


@hookimpl
def register_jobs() -> list[type]:
    """The jobs of this plugin: ``example-steps`` (no Spark; for tests of jobs in a worker cluster)."""
    return [StepsJob]
