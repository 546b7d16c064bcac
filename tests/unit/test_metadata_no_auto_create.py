"""Unit tests of the metadata patch (mirrorline.clients.no_auto_create), RecordProducer's arguments and
the ``max.block.ms`` mapping: the pure-logic side of "our clients never auto-create topics"."""

from __future__ import annotations

import aiokafka
import pytest
from aiokafka.protocol.metadata import MetadataRequest, MetadataRequest_v1, MetadataRequest_v4, MetadataRequest_v5

from mirrorline.api import PartitionNotAvailableError, RetriableError
from mirrorline.clients import no_auto_create
from mirrorline.clients.kafka_clients import client_kwargs
from mirrorline.clients.producer import DEFAULT_MAX_BLOCK_MS, RecordProducer


@pytest.mark.parametrize("struct", [MetadataRequest_v4, MetadataRequest_v5])
def test_metadata_requests_default_to_no_auto_creation(struct):
    assert no_auto_create.is_installed()
    assert MetadataRequest(["t"]).build(struct).allow_auto_topic_creation is False
    assert MetadataRequest(None).build(struct).allow_auto_topic_creation is False
    assert MetadataRequest([]).build(struct).allow_auto_topic_creation is False


def test_explicit_choice_is_kept_and_topics_untouched():
    assert MetadataRequest(["t"], allow_auto_topic_creation=True).build(MetadataRequest_v5).allow_auto_topic_creation
    assert MetadataRequest(["a", "b"]).build(MetadataRequest_v5).topics == ["a", "b"]
    assert MetadataRequest(["a"]).build(MetadataRequest_v1).topics == ["a"]  # v1-3 have no flag at all


def _installed_after(code: str) -> bool:
    """Whether the patch is installed in a fresh interpreter after running ``code``."""
    import subprocess
    import sys

    probe = f"{code}\nfrom mirrorline.clients import no_auto_create\nprint(no_auto_create.is_installed())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1] == "True"


def test_importing_mirrorline_patches_nothing():
    assert not _installed_after("import mirrorline, mirrorline.runtime.worker, mirrorline.connectors.source_mirror.task")


def test_configuring_any_client_installs_the_patch_first():
    assert _installed_after("from mirrorline.clients.kafka_clients import client_kwargs\n"
                            "client_kwargs({'bootstrap.servers': 'a:9092'}, 'admin')")


def test_the_command_line_installs_it_at_start():
    assert _installed_after("from mirrorline.cli.main import main\nmain(['plugins'])")


def test_install_is_idempotent():
    before = MetadataRequest.__init__
    no_auto_create.install()
    no_auto_create.install()
    assert MetadataRequest.__init__ is before
    assert MetadataRequest(["t"]).build(MetadataRequest_v4).allow_auto_topic_creation is False


def test_max_block_ms_maps_to_record_producer_argument():
    kwargs, ignored = client_kwargs({"max.block.ms": "1500", "bootstrap.servers": "a:9092"}, "producer")
    assert kwargs == {"max_block_ms": 1500, "bootstrap_servers": "a:9092"}
    assert ignored == []
    for role in ("consumer", "admin"):
        assert client_kwargs({"max.block.ms": "1500"}, role) == ({}, ["max.block.ms"])


async def test_record_producer_takes_max_block_ms():
    assert RecordProducer(bootstrap_servers="a:9092").max_block_ms == DEFAULT_MAX_BLOCK_MS == 60_000
    kwargs, _ = client_kwargs({"max.block.ms": "0", "linger.ms": "5", "acks": "all"}, "producer")
    producer = RecordProducer(**kwargs)  # no connection is made before start()
    assert producer.max_block_ms == 0
    await producer.stop()
    with pytest.raises(ValueError, match="max_block_ms"):
        RecordProducer(max_block_ms=-1)
    assert isinstance(producer, aiokafka.AIOKafkaProducer)


def test_partition_not_available_error_is_retriable_and_names_what_was_awaited():
    error = PartitionNotAvailableError("orders", 3, "Partition 3 of topic orders is not there")
    assert isinstance(error, RetriableError) and error.retriable
    assert (error.topic, error.partition, str(error)) == ("orders", 3, "Partition 3 of topic orders is not there")
