"""The process-wide changes mirrorline makes to aiokafka, installed together before any client exists.

- :mod:`.no_auto_create`: metadata requests never auto-create a topic;
- :mod:`.frame_release`: connections let go of each response's bytes once it is read;
- :mod:`.metadata_reuse`: a metadata refresh whose answer has not changed rebuilds nothing;
- :mod:`.fetch_planner`: a partition state notes a change of its position or pause in its
  assignment (read only by the fast fetch plans; other consumers are not affected);
- :mod:`.compiled_codecs`: Fetch and Produce messages and their headers are encoded and decoded
  by functions compiled from their schemas instead of aiokafka's walk of them.

The command line, job processes, the test kit and :func:`~.kafka_clients.client_kwargs` call
:func:`install`; it is idempotent and safe to call from several threads at once. Each change
reads aiokafka's current function and replaces it, so two threads installing together (the local
clusters' readiness probes start one per cluster) could each wrap the other's replacement: a
metadata answer then decoded into itself forever, and every metadata request of the process
failed.
"""

from __future__ import annotations

import threading

from mirrorline.clients import compiled_codecs, fetch_planner, frame_release, metadata_reuse, no_auto_create

_LOCK = threading.Lock()
_installed = False


def install() -> None:
    """Install every process-wide aiokafka change (idempotent; one thread installs, the others wait)."""
    global _installed
    if _installed:
        return
    with _LOCK:
        if _installed:
            return
        no_auto_create.install()
        frame_release.install()
        metadata_reuse.install()
        fetch_planner.track_state_changes()
        compiled_codecs.install()
        _installed = True
