"""The offset store keeps its own copies of what tasks hand it, in key order, as JSON would hold them."""

import math

import pytest

from mirrorline.storage.kafka_offsets import _copy


def test_flat_maps_are_copied_as_they_are():
    partition = {"cluster": "A", "topic": "t", "partition": 3}
    copied = _copy(partition)
    assert copied == partition and copied is not partition
    assert list(copied) == ["cluster", "topic", "partition"]
    offset = {"offset": 12, "ratio": 0.5, "done": True, "note": None}
    assert _copy(offset) == offset
    assert math.isnan(_copy({"x": float("nan")})["x"])


def test_other_maps_go_through_json():
    nested = {"list": (1, 2), "inner": {"a": [1]}, 7: "seven"}
    copied = _copy(nested)
    assert copied == {"list": [1, 2], "inner": {"a": [1]}, "7": "seven"}
    assert copied["inner"] is not nested["inner"]


def test_values_json_cannot_hold_fail_early():
    with pytest.raises(TypeError):
        _copy({"offset": object()})
    with pytest.raises(TypeError):
        _copy({"when": {1, 2}})
