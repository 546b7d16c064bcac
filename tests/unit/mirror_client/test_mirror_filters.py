"""Tests for MM2 topic and group filters (mm2.md §3.1, §4.1)."""

import pytest

from mirrorline.connectors.mirror_client.filters import (
    GROUPS_EXCLUDE_DEFAULT,
    TOPICS_EXCLUDE_DEFAULT,
    GroupFilter,
    TopicFilter,
    parse_config_list,
)


def test_defaults_match_mm2():
    assert TOPICS_EXCLUDE_DEFAULT == ".*[\\-\\.]internal, .*\\.replica, __.*"
    assert GROUPS_EXCLUDE_DEFAULT == "console-consumer-.*, connect-.*, __.*"
    tf = TopicFilter()
    assert tf.include_patterns == [".*"]
    assert tf.exclude_patterns == [".*[\\-\\.]internal", ".*\\.replica", "__.*"]
    gf = GroupFilter()
    assert gf.include_patterns == [".*"]
    assert gf.exclude_patterns == ["console-consumer-.*", "connect-.*", "__.*"]


@pytest.mark.parametrize(
    "topic, selected",
    [
        ("orders", True),
        ("A.orders", True),
        ("heartbeats", True),
        ("mm2-offset-syncs.B.internal", False),
        ("connect-offsets-internal", False),
        ("orders.replica", False),
        ("ordersXreplica", True),
        ("__consumer_offsets", False),
        ("_single", True),
        ("internal", True),
        ("xinternal", True),
    ],
)
def test_default_topic_filter(topic, selected):
    assert TopicFilter().should_replicate_topic(topic) is selected


@pytest.mark.parametrize(
    "group, selected",
    [
        ("orders-app", True),
        ("console-consumer-12345", False),
        ("connect-mirror", False),
        ("__internal", False),
        ("my-connect-app", True),
    ],
)
def test_default_group_filter(group, selected):
    assert GroupFilter().should_replicate_group(group) is selected


def test_full_match_not_search():
    tf = TopicFilter({"topics": "ord"})
    assert not tf.should_replicate_topic("orders")
    assert tf.should_replicate_topic("ord")
    tf = TopicFilter({"topics": "ord.*", "topics.exclude": "s"})
    assert tf.should_replicate_topic("orders")  # "s" must match the whole name


def test_list_joined_with_alternation():
    tf = TopicFilter({"topics": " orders , pay.* ,\tusers "})
    assert tf.include_patterns == ["orders", "pay.*", "users"]
    assert tf.should_replicate_topic("orders")
    assert tf.should_replicate_topic("payments")
    assert tf.should_replicate_topic("users")
    assert not tf.should_replicate_topic("ordersx")


def test_alternation_is_not_anchored_per_element_precedence():
    # Joined as "a|b.*": full match applies to the whole alternation.
    tf = TopicFilter({"topics": "a, b.*", "topics.exclude": ""})
    assert tf.should_replicate_topic("a")
    assert tf.should_replicate_topic("bcd")
    assert not tf.should_replicate_topic("ab")


def test_empty_include_matches_nothing():
    for value in ("", "   ", []):
        tf = TopicFilter({"topics": value})
        assert not tf.should_replicate_topic("orders")
        assert not tf.should_replicate_topic("")


def test_empty_exclude_excludes_nothing():
    tf = TopicFilter({"topics.exclude": ""})
    assert tf.should_replicate_topic("__consumer_offsets")
    assert tf.should_replicate_topic("x.internal")
    gf = GroupFilter({"groups.exclude": ""})
    assert gf.should_replicate_group("console-consumer-1")


def test_group_include_and_exclude():
    gf = GroupFilter({"groups": "app-.*", "groups.exclude": "app-test-.*"})
    assert gf.should_replicate_group("app-prod")
    assert not gf.should_replicate_group("app-test-1")
    assert not gf.should_replicate_group("other")


def test_unrelated_keys_ignored_and_none_means_default():
    tf = TopicFilter({"groups": "nothing", "topics": None, "replication.factor": "3"})
    assert tf.should_replicate_topic("orders")
    assert not tf.should_replicate_topic("__consumer_offsets")


def test_reconfigure():
    tf = TopicFilter()
    tf.configure({"topics": "only"})
    assert tf.should_replicate_topic("only")
    assert not tf.should_replicate_topic("orders")


@pytest.mark.parametrize(
    "value, parsed",
    [
        ("a,b", ["a", "b"]),
        ("  a ,  b  ", ["a", "b"]),
        ("a,,b", ["a", "", "b"]),
        ("a,", ["a", ""]),
        (",a", ["", "a"]),
        ("", []),
        (" \t\n", []),
        ("a\u00a0,b", ["a\u00a0", "b"]),  # Java \s does not include NBSP
        (["x", "y"], ["x", "y"]),
    ],
)
def test_parse_config_list(value, parsed):
    assert parse_config_list(value) == parsed


def test_empty_element_matches_only_empty_name():
    tf = TopicFilter({"topics": "a,", "topics.exclude": ""})
    assert tf.should_replicate_topic("a")
    assert tf.should_replicate_topic("")
    assert not tf.should_replicate_topic("b")


def test_ascii_character_classes_like_java():
    tf = TopicFilter({"topics": r"\w+", "topics.exclude": ""})
    assert tf.should_replicate_topic("orders_1")
    assert not tf.should_replicate_topic("ordérs")


@pytest.mark.parametrize(
    "config, key, bad",
    [
        ({"topics": "orders, pay[ments"}, "topics", "pay[ments"),
        ({"topics.exclude": "(unclosed"}, "topics.exclude", "(unclosed"),
    ],
)
def test_invalid_topic_regex(config, key, bad):
    with pytest.raises(ValueError) as info:
        TopicFilter(config)
    message = str(info.value)
    assert repr(key) in message
    assert repr(bad) in message


def test_invalid_group_regex():
    with pytest.raises(ValueError, match="groups.exclude.*\\*bad"):
        GroupFilter({"groups.exclude": "*bad"})


def test_elements_invalid_alone_but_valid_joined_are_accepted_like_java():
    # Java compiles only the joined pattern: "a\\" + "|" + "b" is "a\\|b", a literal "a|b"
    tf = TopicFilter({"topics": r"a\, b"})
    assert tf.include_patterns == ["a\\", "b"]
    assert tf.should_replicate_topic("a|b")
    assert not tf.should_replicate_topic("a")


def test_joined_pattern_reported_when_no_single_element_is_bad():
    # Python (unlike Java) rejects a global inline flag that is not at the start
    with pytest.raises(ValueError, match=r"'topics'.*'a\|\(\?i\)b'"):
        TopicFilter({"topics": "a, (?i)b"})
