"""Runtime log levels for ``/admin/loggers`` (KIP-495), on Python's :mod:`logging`.

Mirrors Connect's ``Loggers`` class: level names are log4j's (``OFF``, ``FATAL``, ``ERROR``,
``WARN``, ``INFO``, ``DEBUG``, ``TRACE``, ``ALL``; Python's ``WARNING`` and ``CRITICAL`` are
accepted too), the root logger is called ``root``, and setting a namespace sets it and every
existing logger below it. ``last_modified`` (epoch ms) is recorded for each logger whose level
this object changed, and is null for the others.

One difference from Connect: "below" means the dotted hierarchy (``a.b`` covers ``a.b.c``
but not ``a.bc``), where Connect uses a plain string prefix.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

ROOT_LOGGER_NAME = "root"

_LEVELS: dict[str, int] = {
    "OFF": logging.CRITICAL + 10,
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": 5,
    "ALL": 1,
}
_ALIASES = {"WARNING": "WARN", "CRITICAL": "FATAL"}
_NAMES = {number: name for name, number in _LEVELS.items()}


def parse_level(text: str) -> int | None:
    """The :mod:`logging` level for a log4j (or Python) level name, any case; None if unknown."""
    name = text.strip().upper()
    return _LEVELS.get(_ALIASES.get(name, name))


def level_name(level: int) -> str:
    """The log4j name of a :mod:`logging` level (``logging.WARNING`` → ``WARN``)."""
    return _NAMES.get(level) or logging.getLevelName(level)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Loggers:
    """Reads and sets the levels of this process's loggers, remembering when it changed them."""

    def __init__(self, clock_ms: Callable[[], int] = _now_ms) -> None:
        """``clock_ms`` returns the current time in epoch milliseconds (injectable for tests)."""
        self._clock_ms = clock_ms
        self._last_modified: dict[str, int] = {}

    @staticmethod
    def _existing() -> list[logging.Logger]:
        """Every logger created so far, root excluded (placeholders are not loggers yet)."""
        manager = logging.Logger.manager
        return [lg for lg in list(manager.loggerDict.values()) if isinstance(lg, logging.Logger)]

    def _level_info(self, logger: logging.Logger, name: str) -> dict[str, Any]:
        level = logger.level or logger.getEffectiveLevel()
        return {"level": level_name(level), "last_modified": self._last_modified.get(name)}

    def level(self, name: str) -> dict[str, Any] | None:
        """LoggerLevel ``{"level", "last_modified"}`` of an existing logger, or None if there is none.

        A logger without its own level reports its effective (inherited) level.
        """
        if name.lower() == ROOT_LOGGER_NAME:
            return self._level_info(logging.getLogger(), ROOT_LOGGER_NAME)
        logger = logging.Logger.manager.loggerDict.get(name)
        if not isinstance(logger, logging.Logger):
            return None
        return self._level_info(logger, name)

    def all_levels(self) -> dict[str, dict[str, Any]]:
        """``{name: LoggerLevel}`` for every logger with a level of its own, plus ``root``; sorted."""
        result = {lg.name: self._level_info(lg, lg.name) for lg in self._existing() if lg.level != logging.NOTSET}
        result[ROOT_LOGGER_NAME] = self._level_info(logging.getLogger(), ROOT_LOGGER_NAME)
        return dict(sorted(result.items()))

    def set_level(self, namespace: str, level: int) -> list[str]:
        """Set ``namespace`` and every existing logger below it to ``level``; the affected names, sorted.

        ``root`` (any case) means every logger. The namespace's own logger is created if it
        does not exist yet. Loggers already at ``level`` are listed but left untouched (their
        ``last_modified`` does not change).
        """
        log.info("Setting level of namespace %s and children to %s", namespace, level_name(level))
        targets: list[tuple[str, logging.Logger]]
        if namespace.lower() == ROOT_LOGGER_NAME:
            targets = [(lg.name, lg) for lg in self._existing()]
            targets.append((ROOT_LOGGER_NAME, logging.getLogger()))
        else:
            prefix = namespace + "."
            targets = [(lg.name, lg) for lg in self._existing()
                       if lg.name == namespace or lg.name.startswith(prefix)]
            if not any(name == namespace for name, _ in targets):
                targets.append((namespace, logging.getLogger(namespace)))
        for name, logger in targets:
            if (logger.level or logger.getEffectiveLevel()) == level:
                log.debug("Skipping update for logger %s since its level is already %s", name, level_name(level))
                continue
            self._last_modified[name] = self._clock_ms()
            logger.setLevel(level)
        return sorted(name for name, _ in targets)
