"""Our Kafka clients never cause a topic to be auto-created by asking for its metadata.

Brokers default to ``auto.create.topics.enable=true``, and a Metadata request (v4+) carries an
``allow_auto_topic_creation`` flag that aiokafka always sets to true. So a producer that looks
up a topic, a consumer subscribed or assigned to one, and ``AIOKafkaAdminClient.describe_topics``
all make the broker create a missing topic with the broker's default partition count. A mirror
then finds a 1-partition remote topic where it meant to create one with the source's count
(its CreateTopics is answered TOPIC_ALREADY_EXISTS), and records for higher partitions have
nowhere to go. Java's Connect and MM2 clients do not have that problem: the Java consumer asks
with ``allow.auto.create.topics`` and the admin client never asks for creation.

:func:`install` makes every ``aiokafka.protocol.metadata.MetadataRequest`` built in this process
default to ``allow_auto_topic_creation=False``; a caller that passes ``True`` explicitly still
gets it. Patching the request class (rather than a client) covers every place aiokafka builds
one: ``AIOKafkaClient._metadata_update`` and its bootstrap request (used by every producer and
consumer) and ``AIOKafkaAdminClient._get_cluster_metadata``. ``framework/__init__.py`` imports
this module, so any process that imports mirrorline (worker, connectors, CLI tools, tests) is
covered before it makes a client.

One client may opt back in: :func:`allow_auto_create` makes the metadata requests of that one
aiokafka client (a producer's ``.client``) allow auto-creation, so a broker's
``auto.create.topics.enable`` decides for it as it does for a Java producer. The worker does this
for a source task whose connector neither creates its own topics nor has Connect's topic creation
(KIP-158) configured; every other client in the process keeps the default.

This relies on aiokafka's internal ``MetadataRequest(topics, allow_auto_topic_creation=None)``
signature, which is why aiokafka is pinned ``<0.15`` in pyproject.toml; :func:`install` refuses
loudly if that signature is gone rather than silently letting topics be created.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from typing import Any

from aiokafka.protocol.metadata import MetadataRequest

_MARKER = "_mirrorline_no_auto_create"
_CLIENT_MARKER = "_mirrorline_allows_auto_create"
#: Set (only) while an opted-in client builds its metadata request: the default it gets.
_ALLOWED: contextvars.ContextVar[bool] = contextvars.ContextVar("mirrorline_allow_auto_create", default=False)


def install() -> None:
    """Make ``MetadataRequest`` default to no auto-creation; calling it again changes nothing."""
    if is_installed():
        return
    original = MetadataRequest.__init__
    if "allow_auto_topic_creation" not in inspect.signature(original).parameters:
        raise ImportError("aiokafka's MetadataRequest no longer takes allow_auto_topic_creation; "
                          "mirrorline.clients.no_auto_create must be updated for this aiokafka version")

    @functools.wraps(original)
    def __init__(self, topics=None, allow_auto_topic_creation=None):
        chosen = _ALLOWED.get() if allow_auto_topic_creation is None else allow_auto_topic_creation
        original(self, topics, chosen)

    setattr(__init__, _MARKER, True)
    MetadataRequest.__init__ = __init__


def allow_auto_create(client: Any) -> None:
    """Let the metadata requests of this one aiokafka ``AIOKafkaClient`` allow topic auto-creation.

    aiokafka builds every metadata request of a client in ``_metadata_update``; while that runs
    for ``client``, requests default to ``allow_auto_topic_creation=True`` (the context variable
    is set in the calling task only, so other clients are unaffected). Calling it twice is harmless.
    """
    if getattr(client, _CLIENT_MARKER, False):
        return
    original = client._metadata_update

    @functools.wraps(original)
    async def _metadata_update(*args, **kwargs):
        token = _ALLOWED.set(True)
        try:
            return await original(*args, **kwargs)
        finally:
            _ALLOWED.reset(token)

    client._metadata_update = _metadata_update
    setattr(client, _CLIENT_MARKER, True)


def allows_auto_create(client: Any) -> bool:
    """Whether :func:`allow_auto_create` was applied to ``client``."""
    return bool(getattr(client, _CLIENT_MARKER, False))


def is_installed() -> bool:
    """Whether :func:`install` has run in this process."""
    return getattr(MetadataRequest.__init__, _MARKER, False)
