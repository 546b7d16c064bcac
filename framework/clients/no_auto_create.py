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

This relies on aiokafka's internal ``MetadataRequest(topics, allow_auto_topic_creation=None)``
signature, which is why aiokafka is pinned ``<0.15`` in pyproject.toml; :func:`install` refuses
loudly if that signature is gone rather than silently letting topics be created.
"""

from __future__ import annotations

import functools
import inspect

from aiokafka.protocol.metadata import MetadataRequest

_MARKER = "_mirrorline_no_auto_create"


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
        original(self, topics, False if allow_auto_topic_creation is None else allow_auto_topic_creation)

    setattr(__init__, _MARKER, True)
    MetadataRequest.__init__ = __init__


def is_installed() -> bool:
    """Whether :func:`install` has run in this process."""
    return getattr(MetadataRequest.__init__, _MARKER, False)
