"""The plugin module named by the ``mirrorline`` entry point: it only declares what it provides."""

from __future__ import annotations

from mirrorline.api import hookimpl

from mirrorline_example.sequence import SequenceSourceConnector


@hookimpl
def register_connectors() -> list[type]:
    """The connectors of this plugin: ``SequenceSourceConnector``."""
    return [SequenceSourceConnector]
