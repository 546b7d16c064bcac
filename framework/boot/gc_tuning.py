"""The cyclic garbage collector of a mirrorline process, tuned for a heap of long-lived objects.

A worker mirroring thousands of partitions holds hundreds of thousands of long-lived objects
(per-partition state in the clients, the tasks, the stores and the metrics: 600,000 at 8,000
partitions) and allocates and drops many short-lived ones per record batch, fetch answer,
checkpoint cycle and offsets flush. With CPython's default thresholds (700, 10, 10) a
generation-0 collection runs every 700 net container allocations, so the objects of a
checkpoint cycle or a flush (tens of thousands, alive for milliseconds) are promoted to the old
generation before they die; every promotion counts towards the next full collection, and each
full collection walks the whole heap. Measured with a probe on the scale benchmark (8,000
partitions, 500 groups): full collections of about 0.1-0.4 s each, 38 in the 2.5 minutes of the
initial copy (about 7 of its 29 CPU-seconds) and one every 1.5-3 minutes when idle.

:func:`tune` raises the generation-0 threshold (:data:`THRESHOLDS`), so a burst of short-lived
objects dies young: at (10,000, 20, 10) the same run spent 1.95 s collecting in all (about 7.5
s in the copy and first idle minute before), with no full collection in six idle minutes. Collections still run, and reference cycles are still freed;
the young generation just holds more before it is examined, which costs some memory (see
docs/performance.md). ``MIRRORLINE_GC_THRESHOLDS=700,10,10`` (three integers, as
:func:`gc.set_threshold` takes them) sets others, or CPython's defaults.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Mapping

from mirrorline.api.errors import ConfigError

#: (generation 0, generation 1, generation 2) as :func:`gc.set_threshold` takes them
THRESHOLDS = (10_000, 20, 10)
ENVIRONMENT_VARIABLE = "MIRRORLINE_GC_THRESHOLDS"

log = logging.getLogger(__name__)


def thresholds_from(environ: Mapping[str, str]) -> tuple[int, int, int]:
    """The thresholds asked for in ``environ``, or :data:`THRESHOLDS`; a malformed value is a ConfigError."""
    value = environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if not value:
        return THRESHOLDS
    parts = [part.strip() for part in value.split(",")]
    try:
        numbers = tuple(int(part) for part in parts)
    except ValueError:
        numbers = ()
    if len(numbers) != 3 or numbers[0] < 1 or min(numbers) < 0:
        raise ConfigError(f"{ENVIRONMENT_VARIABLE}={value!r} is not three comma-separated integers with the "
                          f"first at least 1 (e.g. 700,10,10, CPython's defaults); unset it for mirrorline's "
                          f"{','.join(map(str, THRESHOLDS))}")
    return numbers  # type: ignore[return-value]


def tune(environ: Mapping[str, str] | None = None) -> tuple[int, int, int]:
    """Set this process's collector thresholds (see the module docstring); returns them."""
    thresholds = thresholds_from(os.environ if environ is None else environ)
    gc.set_threshold(*thresholds)
    log.debug("garbage collector thresholds: %s", ",".join(map(str, thresholds)))
    return thresholds
