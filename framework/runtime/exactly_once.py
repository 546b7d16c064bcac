"""Exactly-once source support (Kafka Connect's KIP-618): the rules written once.

- the worker setting ``exactly.once.source.support``: ``disabled`` (default), ``preparing`` (the
  first step of turning it on in a running cluster: the leader already keeps the fencing
  records, tasks still write at-least-once) or ``enabled`` (tasks write in transactions);
- the transactional id of a task, as Connect derives it: ``<group.id>-<connector>-<task>``;
- the preflight checks of a source connector's ``exactly.once.support=required`` and
  ``transaction.boundary=connector``, with Connect's messages, added to ``config/validate`` and
  to every create or update (so a connector whose guarantee cannot hold is refused with 400).

Standalone workers never write exactly-once (as in Connect); beyond Connect, which accepts
``exactly.once.support=required`` there and silently runs at-least-once, they refuse it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from mirrorline.api.config import ConfigValue
from mirrorline.api.connector import ConnectorTransactionBoundaries, ExactlyOnceSupport
from mirrorline.runtime.source_config import (
    CONNECTOR,
    EXACTLY_ONCE_SUPPORT,
    REQUIRED,
    TRANSACTION_BOUNDARY,
)
from mirrorline.runtime.worker_config import EXACTLY_ONCE_SOURCE_SUPPORT

log = logging.getLogger(__name__)

DISABLED, PREPARING, ENABLED = "disabled", "preparing", "enabled"
#: ``worker_support`` value of a standalone worker (it has no such setting).
STANDALONE = None

NOT_ENABLED = "This worker does not have exactly-once source support enabled."
STANDALONE_NOTE = (" Standalone workers never write exactly-once: run the connector on distributed workers (or "
                   "mirrorline mm2) with exactly.once.source.support=enabled.")
NOT_DECLARED = ("The connector does not implement the API required for preflight validation of exactly-once source "
                "support. Please consult the documentation for the connector to determine whether it supports "
                "exactly-once semantics, and then consider reconfiguring the connector to use the value \"requested\" "
                "for this property (which will disable this preflight check and allow the connector to be created).")
NOT_SUPPORTED = "The connector does not support exactly-once semantics with the provided configuration."
NO_CONNECTOR_BOUNDARIES = ("The connector does not support connector-defined transaction boundaries with the given "
                           "configuration. Please reconfigure it to use a different transaction boundary definition.")


def transactional_id(group_id: str, connector: str, task: int) -> str:
    """The transactional id of a task's producer: ``<group.id>-<connector>-<task>`` (Connect's
    ``Worker.taskTransactionalId``; e.g. ``A-mm2-MirrorSourceConnector-0`` in MM2's dedicated mode)."""
    return f"{group_id}-{connector}-{task}"


def worker_support(worker_config: Mapping[str, Any]) -> str | None:
    """The worker's ``exactly.once.source.support``, or None for a standalone worker (which has no such setting)."""
    if EXACTLY_ONCE_SOURCE_SUPPORT not in worker_config:
        return STANDALONE
    return str(worker_config[EXACTLY_ONCE_SOURCE_SUPPORT])


def _unexpected(exc: BaseException) -> str:
    message = str(exc).strip()
    return ("An unexpected error occurred during validation" +
            (f": {message}" if message else "; please see the worker logs for more details."))


def add_exactly_once_errors(connector_class: type, config: Mapping[str, Any], values: Iterable[ConfigValue],
                            support: str | None) -> None:
    """Connect's preflight checks of a source connector, as errors on its ``exactly.once.support`` and
    ``transaction.boundary`` values (``support``: the worker's setting, None for standalone)."""
    if getattr(connector_class, "type", None) != "source":
        return
    by_name = {value.name: value for value in values}
    eos = by_name.get(EXACTLY_ONCE_SUPPORT)
    if eos is not None and not eos.errors and str(eos.value or "").strip().lower() == REQUIRED:
        if support != ENABLED:
            eos.errors.append(NOT_ENABLED + (STANDALONE_NOTE if support is STANDALONE else ""))
        try:
            answer = connector_class().exactly_once_support(dict(config))
        except Exception as exc:  # a plugin's check must not turn bad input into a 500
            log.error("Failed while validating connector support for exactly-once semantics", exc_info=True)
            eos.errors.append(_unexpected(exc))
        else:
            if answer is None:
                eos.errors.append(NOT_DECLARED)
            elif answer != ExactlyOnceSupport.SUPPORTED:
                eos.errors.append(NOT_SUPPORTED)
    boundary = by_name.get(TRANSACTION_BOUNDARY)
    if boundary is not None and not boundary.errors and str(boundary.value or "").strip().lower() == CONNECTOR:
        try:
            answer = connector_class().can_define_transaction_boundaries(dict(config))
        except Exception as exc:
            log.error("Failed while validating connector support for defining its own transaction boundaries",
                      exc_info=True)
            boundary.errors.append(_unexpected(exc))
        else:
            if answer is None:
                boundary.errors.append(
                    "This connector has returned a null value from its canDefineTransactionBoundaries method, which "
                    "is not permitted. The connector will be treated as if it cannot define its own transaction "
                    "boundaries, and cannot be configured with 'transaction.boundary' set to 'connector'.")
            elif answer != ConnectorTransactionBoundaries.SUPPORTED:
                boundary.errors.append(NO_CONNECTOR_BOUNDARIES)
