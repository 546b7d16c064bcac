"""Each Kafka connection lets go of a response's bytes once the response is read.

aiokafka's connection reads responses in one loop per connection (``AIOKafkaConnection._read``):
it reads a frame, hands it to ``_handle_frame`` (which decodes it into new objects), then waits
for the next frame with the last one still in a local variable. So every connection holds its
last response until the next arrives. For a Fetch connection that is up to ``fetch.max.bytes``
(50 MiB by default) of bytes already decoded and copied, held for as long as the connection is
quiet, for example while the fetch-ahead bound (:mod:`.fetch_planner`) waits for the caller.
tracemalloc in a worker mirroring 8,000 partitions found 100 MiB of such frames alive at the
peak (two tasks' last Fetch answers), as much as the records the tasks were about to copy.

:func:`install` replaces that loop with the same loop that drops each frame after handling it.
It patches the class once per process (where :mod:`.no_auto_create` is installed, so every
client mirrorline makes is covered) and refuses loudly if aiokafka's loop is not the one it was
written against (aiokafka is pinned to a minor version for this and the other patches).
"""

from __future__ import annotations

import inspect
import struct

from aiokafka.conn import AIOKafkaConnection

_MARKER = "_mirrorline_releases_frames"
#: aiokafka's own loop, once replaced (its unit test shows what it held)
_ORIGINAL_READ = None
_SIZE = struct.Struct(">i")
#: what aiokafka 0.14's loop does, in order: the replacement must do the same, and only drop the frame
_EXPECTED_STEPS = ("reader.readexactly(4)", 'struct.unpack(">i", resp)', "reader.readexactly(size)",
                   "self._handle_frame(resp)")


async def _read(self_ref):
    """aiokafka's read loop (``AIOKafkaConnection._read``) without the last frame kept alive.

    The connection is reached through a weak reference, as in the original, so a leaked
    connection can still be collected; errors end the task and reach the connection's done
    callback, as in the original."""
    self = self_ref()
    if self is None:
        return
    reader = self._reader
    del self
    while True:
        (size,) = _SIZE.unpack(await reader.readexactly(4))
        frame = await reader.readexactly(size)
        self = self_ref()
        if self is None:
            return
        self._handle_frame(frame)
        del self, frame


def install() -> None:
    """Make every aiokafka connection release each response's bytes once read; idempotent."""
    if is_installed():
        return
    original = inspect.getattr_static(AIOKafkaConnection, "_read")
    source = inspect.getsource(original.__func__ if isinstance(original, staticmethod) else original)
    missing = [step for step in _EXPECTED_STEPS if step not in source]
    if not isinstance(original, staticmethod) or missing:
        raise ImportError(f"aiokafka's AIOKafkaConnection._read is not the loop mirrorline.clients.frame_release "
                          f"replaces (missing: {', '.join(missing) or 'staticmethod'}); update it for this aiokafka")
    global _ORIGINAL_READ
    _ORIGINAL_READ = original.__func__
    setattr(_read, _MARKER, True)
    AIOKafkaConnection._read = staticmethod(_read)


def is_installed() -> bool:
    """Whether :func:`install` has run in this process."""
    return getattr(inspect.getattr_static(AIOKafkaConnection, "_read").__func__, _MARKER, False)
