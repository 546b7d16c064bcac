"""The event loop every mirrorline process runs on: uvloop where installed, else asyncio's own.

Every fetch and produce request is a few event-loop turns, socket reads and writes and
callbacks, and a fetch answer of hundreds of KiB is read from the socket in pieces. uvloop
(libuv, in C) does that for less CPU than asyncio's pure-Python selector loop. Measured in one
sitting with ``tests/benchmarks/bench_latency.py`` (``mirrorline`` against ``mirrorline-asyncio``,
1000-B records, 12 partitions, 150 s): 38.4 against 41.7 CPU-seconds at 30 MB/s (-8 %), 29.2
against 37.1 at 10 MB/s (-21 %), 19.4 against 19.8 at 1 MB/s (-2 %, within the noise); see
docs/performance.md.

uvloop is a dependency wherever it builds (not on Windows). ``MIRRORLINE_EVENT_LOOP=asyncio``
runs a process on asyncio's own loop instead, e.g. to rule the loop out when chasing a fault;
``uvloop`` insists on uvloop (an error when it is not installed). Anything else is a
:class:`~mirrorline.api.errors.ConfigError`, reported on one line by the command line.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from mirrorline.api.errors import ConfigError

ENVIRONMENT_VARIABLE = "MIRRORLINE_EVENT_LOOP"
#: the loops :data:`ENVIRONMENT_VARIABLE` may name
CHOICES = ("uvloop", "asyncio")

T = TypeVar("T")
log = logging.getLogger(__name__)


def uvloop_installed() -> bool:
    """Whether uvloop can be imported in this environment."""
    return importlib.util.find_spec("uvloop") is not None


def chosen_loop(environ: Mapping[str, str] | None = None) -> str:
    """``"uvloop"`` or ``"asyncio"``: what :data:`ENVIRONMENT_VARIABLE` asks for, or uvloop where installed.

    Raises ConfigError for an unknown name, or for ``uvloop`` when it is not installed."""
    value = (os.environ if environ is None else environ).get(ENVIRONMENT_VARIABLE, "").strip().lower()
    if not value:
        return "uvloop" if uvloop_installed() else "asyncio"
    if value not in CHOICES:
        raise ConfigError(f"{ENVIRONMENT_VARIABLE}={value!r} is not one of {', '.join(CHOICES)}; unset it to run "
                          f"on uvloop where it is installed")
    if value == "uvloop" and not uvloop_installed():
        raise ConfigError(f"{ENVIRONMENT_VARIABLE}=uvloop but uvloop is not installed in this Python "
                          f"environment: install it (pip install uvloop) or set {ENVIRONMENT_VARIABLE}=asyncio")
    return value


def loop_factory(environ: Mapping[str, str] | None = None) -> Callable[[], asyncio.AbstractEventLoop]:
    """A function making a new event loop of the :func:`chosen_loop` kind."""
    if chosen_loop(environ) == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def new_event_loop(environ: Mapping[str, str] | None = None) -> asyncio.AbstractEventLoop:
    """A new event loop of the :func:`chosen_loop` kind, not yet set as the current one."""
    return _logged(loop_factory(environ)())


def run(main: Coroutine[Any, Any, T], environ: Mapping[str, str] | None = None) -> T:
    """Run ``main`` to completion on a new loop of the :func:`chosen_loop` kind, as :func:`asyncio.run` does.

    The loop is closed afterwards, its remaining tasks cancelled and its async generators and
    default executor shut down."""
    try:
        factory = loop_factory(environ)
    except BaseException:
        main.close()  # never awaited: no "coroutine was never awaited" warning on top of the error
        raise
    with asyncio.Runner(loop_factory=lambda: _logged(factory())) as runner:
        return runner.run(main)


def _logged(loop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
    log.debug("event loop: %s.%s", type(loop).__module__, type(loop).__qualname__)
    return loop
