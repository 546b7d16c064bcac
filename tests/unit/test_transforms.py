"""Unit tests of the built-in transforms and predicates, the chain, and transform config validation."""

from __future__ import annotations

import json

import pytest

import mirrorline.transforms
from mirrorline.api import ConfigError, DataError, Password, SourceRecord
from mirrorline.api.secrets import HIDDEN, redact
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.abstract_herder import _config_infos, validate_or_raise
from mirrorline.runtime.transform_chain import TransformError, build_chain
from mirrorline.runtime.transform_config import alias_configs, iter_values, transform_config_def
from mirrorline.transforms.java_syntax import JavaDateFormat

PARTITION = {"cluster": "A", "partition": 2, "topic": "orders"}


@pytest.fixture(scope="module")
def plugins() -> PluginRegistry:
    """The installed plugins: the built-ins (and the test plugins, installed by scripts/bootstrap)."""
    registry = PluginRegistry.discover()
    assert not registry.failures, registry.failures
    return registry


def record(value=None, *, key=None, topic="A.orders", headers=(), timestamp=1_700_000_000_123, offset=7,
           partition=2) -> SourceRecord:
    if isinstance(value, dict):
        value = json.dumps(value).encode()
    if isinstance(key, dict):
        key = json.dumps(key).encode()
    return SourceRecord(dict(PARTITION), {"offset": offset}, topic, partition, key, value, list(headers), timestamp)


def transform(plugins, type_name: str, **settings):
    """A configured instance of ``type_name`` with ``settings`` (dots written as underscores)."""
    config = {"transforms": "t", "transforms.t.type": type_name,
              **{f"transforms.t.{k.replace('_', '.')}": str(v) for k, v in settings.items()}}
    chain = build_chain(config, plugins)
    return chain.stages[0].transformation


def errors_of(plugins, config: dict) -> dict[str, list[str]]:
    """Every transform/predicate setting with errors, as validation reports them."""
    return {value.name: value.errors for _, value in iter_values(alias_configs(config, plugins)) if value.errors}


def value_of(result: SourceRecord):
    return json.loads(result.value)


# -- names ---------------------------------------------------------------------------------

JAVA = "org.apache.kafka.connect.transforms."


@pytest.mark.parametrize("name, expected", [
    (JAVA + "RegexRouter", "RegexRouter"), (JAVA + "TimestampRouter", "TimestampRouter"),
    (JAVA + "Filter", "Filter"), (JAVA + "InsertHeader", "InsertHeader"), (JAVA + "DropHeaders", "DropHeaders"),
    (JAVA + "HeaderFrom$Value", "HeaderFromValue"), (JAVA + "HeaderFrom$Key", "HeaderFromKey"),
    (JAVA + "InsertField$Value", "InsertFieldValue"), (JAVA + "InsertField$Key", "InsertFieldKey"),
    (JAVA + "ReplaceField$Value", "ReplaceFieldValue"), (JAVA + "MaskField$Value", "MaskFieldValue"),
    (JAVA + "MaskField$Key", "MaskFieldKey"), ("MaskField$Value", "MaskFieldValue"),
    ("mirrorline.transforms.routing.RegexRouter", "RegexRouter"), ("RegexRouter", "RegexRouter"),
])
def test_transforms_answer_to_connect_java_names(plugins, name, expected):
    assert plugins.transforms.resolve(name).__name__ == expected


@pytest.mark.parametrize("name", ["TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"])
def test_predicates_answer_to_connect_java_names(plugins, name):
    assert plugins.predicates.resolve(f"{JAVA}predicates.{name}").__name__ == name


def test_builtins_register_through_their_entry_point():
    registry = PluginRegistry.discover()
    assert registry.pm.get_plugin("transforms") is mirrorline.transforms


# -- routing ----------------------------------------------------------------------------------

def test_regex_router_renames_matching_topics_with_java_group_references(plugins):
    router = transform(plugins, "RegexRouter", regex=r"A\.(.*)", replacement="mirrored.$1")
    original = record({"a": 1})
    routed = router.apply(original)
    assert routed.topic == "mirrored.orders" and original.topic == "A.orders"  # a new record, never mutated
    assert (routed.value, routed.partition, routed.source_offset) == (original.value, 2, {"offset": 7})
    # the whole topic must match, as Java's Matcher.matches(); a non-matching record is returned as is
    assert router.apply(record(topic="xA.orders")).topic == "xA.orders"
    named = transform(plugins, "RegexRouter", regex=r"(?<src>\w+)\.(?<name>.*)", replacement=r"${name}-from-${src}\$")
    assert named.apply(record()).topic == "orders-from-A$"


def test_regex_router_rejects_bad_regex_and_group_references(plugins):
    assert "transforms.t.regex" in errors_of(plugins, {"transforms": "t", "transforms.t.type": "RegexRouter",
                                                       "transforms.t.regex": "(", "transforms.t.replacement": "x"})
    errors = errors_of(plugins, {"transforms": "t", "transforms.t.type": "RegexRouter",
                                 "transforms.t.regex": "(a)", "transforms.t.replacement": "$2"})
    assert "no group 2" in errors["transforms.t.type"][0]


def test_timestamp_router_uses_connect_defaults_in_utc(plugins):
    router = transform(plugins, "TimestampRouter")
    assert router.apply(record(timestamp=1_700_000_000_123)).topic == "A.orders-20231114"
    custom = transform(plugins, "TimestampRouter", topic_format="${timestamp}.${topic}",
                       timestamp_format="yyyy-MM-dd'T'HH:mm:ss.SSS")
    assert custom.apply(record(timestamp=1_700_000_000_123)).topic == "2023-11-14T22:13:20.123.A.orders"
    with pytest.raises(DataError, match="Timestamp missing"):
        router.apply(record(timestamp=None))
    assert "transforms.t.timestamp.format" in errors_of(
        plugins, {"transforms": "t", "transforms.t.type": "TimestampRouter", "transforms.t.timestamp.format": "yyyyQ"})


def test_date_format_letters():
    assert JavaDateFormat("EEE d MMM yy, h:mm a ''Z''").format(0) == "Thu 1 Jan 70, 12:00 AM '+0000'"


def test_filter_drops_everything_it_is_applied_to(plugins):
    assert transform(plugins, "Filter").apply(record({"a": 1})) is None


# -- headers -------------------------------------------------------------------------------------

def test_insert_header_and_drop_headers(plugins):
    inserted = transform(plugins, "InsertHeader", header="source", value_literal="A").apply(
        record(headers=[("h", b"1")]))
    assert inserted.headers == [("h", b"1"), ("source", b"A")]
    dropper = transform(plugins, "DropHeaders", headers="h,x")
    original = record(headers=[("h", b"1"), ("keep", b"2"), ("h", b"3"), ("x", None)])
    assert dropper.apply(original).headers == [("keep", b"2")]
    assert len(original.headers) == 4
    assert "transforms.t.headers" in errors_of(plugins, {"transforms": "t", "transforms.t.type": "DropHeaders",
                                                         "transforms.t.headers": ""})


def test_header_from_moves_or_copies_fields(plugins):
    mover = transform(plugins, f"{JAVA}HeaderFrom$Value", fields="id,meta,gone", headers="x-id,x-meta,x-gone",
                      operation="move")
    moved = mover.apply(record({"id": "o-1", "meta": {"v": 1}, "n": 3}))
    assert moved.headers == [("x-id", b"o-1"), ("x-meta", b'{"v":1}'), ("x-gone", None)]
    assert value_of(moved) == {"n": 3}
    copier = transform(plugins, "HeaderFrom$Key", fields="k", headers="x-k", operation="copy")
    copied = copier.apply(record({"v": 1}, key={"k": 5}))
    assert copied.headers == [("x-k", b"5")] and json.loads(copied.key) == {"k": 5}
    errors = errors_of(plugins, {"transforms": "t", "transforms.t.type": "HeaderFrom$Value",
                                 "transforms.t.fields": "a,b", "transforms.t.headers": "x",
                                 "transforms.t.operation": "move"})
    assert "same number of elements" in errors["transforms.t.type"][0]
    errors = errors_of(plugins, {"transforms": "t", "transforms.t.type": "HeaderFrom$Value",
                                 "transforms.t.fields": "a", "transforms.t.headers": "x",
                                 "transforms.t.operation": "cut"})
    assert list(errors) == ["transforms.t.operation"]


# -- fields ---------------------------------------------------------------------------------------

def test_insert_field_adds_record_metadata_and_static_value(plugins):
    inserter = transform(plugins, "InsertField$Value", topic_field="topic!", partition_field="p",
                         timestamp_field="ts?", static_field="origin", static_value="A")
    result = inserter.apply(record({"a": 1}))
    assert value_of(result) == {"a": 1, "topic": "A.orders", "p": 2, "ts": 1_700_000_000_123, "origin": "A"}
    assert inserter.apply(record(None)).value is None  # tombstones pass unchanged
    with pytest.raises(DataError, match="offset.field is only supported for sink records"):
        transform(plugins, "InsertField$Value", offset_field="o").apply(record({"a": 1}))
    keyed = transform(plugins, "InsertField$Key", static_field="s", static_value="v").apply(record(key={"k": 1}))
    assert json.loads(keyed.key) == {"k": 1, "s": "v"}


def test_replace_field_excludes_includes_and_renames(plugins):
    replacer = transform(plugins, "ReplaceField$Value", exclude="secret", renames="a:alpha,b:beta")
    assert value_of(replacer.apply(record({"a": 1, "secret": "x", "b": 2, "c": 3}))) == {"alpha": 1, "beta": 2, "c": 3}
    keeper = transform(plugins, "ReplaceField$Value", include="a,c", exclude="c")
    assert value_of(keeper.apply(record({"a": 1, "b": 2, "c": 3}))) == {"a": 1}
    legacy = transform(plugins, "ReplaceField$Value", blacklist="b")
    assert value_of(legacy.apply(record({"a": 1, "b": 2}))) == {"a": 1}
    assert "transforms.t.renames" in errors_of(plugins, {"transforms": "t", "transforms.t.type": "ReplaceField$Value",
                                                         "transforms.t.renames": "a-b"})


def test_mask_field_masks_with_empty_values_or_a_replacement(plugins):
    masker = transform(plugins, "MaskField$Value", fields="s,i,f,b,l,m,n,absent")
    original = record({"s": "secret", "i": 42, "f": 1.5, "b": True, "l": [1], "m": {"x": 1}, "n": None, "k": "keep"})
    masked = masker.apply(original)
    assert value_of(masked) == {"s": "", "i": 0, "f": 0.0, "b": False, "l": [], "m": {}, "n": None, "k": "keep"}
    assert json.loads(original.value)["s"] == "secret"
    replacing = transform(plugins, "MaskField$Value", fields="ssn,n,x", replacement="99")
    assert value_of(replacing.apply(record({"ssn": "123-45", "n": 7, "x": 2.5}))) == {"ssn": "99", "n": 99, "x": 99.0}
    with pytest.raises(DataError, match="Unable to convert"):
        transform(plugins, "MaskField$Value", fields="n", replacement="***").apply(record({"n": 7}))
    with pytest.raises(DataError, match="Cannot mask field 'b'"):
        transform(plugins, "MaskField$Value", fields="b", replacement="x").apply(record({"b": True}))
    empty_replacement = {"transforms": "t", "transforms.t.type": "MaskField$Value", "transforms.t.fields": "a",
                         "transforms.t.replacement": ""}
    assert "transforms.t.replacement" in errors_of(plugins, empty_replacement)
    assert "transforms.t.fields" in errors_of(plugins, {"transforms": "t", "transforms.t.type": "MaskField$Value"})


@pytest.mark.parametrize("value, kind", [(b"not json", "not JSON"), (b"[1, 2]", "a JSON list"), (b"7", "a JSON int"),
                                         (b"\xff\xfe", "not JSON")])
def test_field_transforms_refuse_values_that_are_not_json_objects(plugins, value, kind):
    masker = transform(plugins, "MaskField$Value", fields="a")
    with pytest.raises(DataError, match=f"MaskFieldValue needs the record value to be a JSON object, but it is {kind}"):
        masker.apply(record(value))


# -- predicates, negate and the chain -----------------------------------------------------------------

def chain_of(plugins, **settings):
    return build_chain({k.replace("__", ".").replace("_", "."): v for k, v in settings.items()}, plugins)


def test_predicates_and_negate_decide_where_a_transform_applies(plugins):
    config = {
        "transforms": "drop,tag", "predicates": "audit,orders",
        "transforms.drop.type": f"{JAVA}Filter", "transforms.drop.predicate": "audit",
        "transforms.tag.type": "InsertHeader", "transforms.tag.header": "tag", "transforms.tag.value.literal": "x",
        "transforms.tag.predicate": "orders", "transforms.tag.negate": "true",
        "predicates.audit.type": f"{JAVA}predicates.HasHeaderKey", "predicates.audit.name": "audit",
        "predicates.orders.type": "TopicNameMatches", "predicates.orders.pattern": r"A\.ord.*",
    }
    chain = build_chain(config, plugins)
    assert chain.apply(record(headers=[("audit", b"")])) is None
    assert chain.apply(record(topic="A.orders")).headers == []  # negated: not applied to matching topics
    assert chain.apply(record(topic="A.payments")).headers == [("tag", b"x")]
    assert chain.apply(record(topic="xA.orders")).headers == [("tag", b"x")]  # the whole name must match


def test_record_is_tombstone(plugins):
    chain = build_chain({"transforms": "f", "transforms.f.type": "Filter", "transforms.f.predicate": "t",
                         "predicates": "t", "predicates.t.type": "RecordIsTombstone"}, plugins)
    assert chain.apply(record(None)) is None
    assert chain.apply(record({"a": 1})) is not None


def test_no_transforms_means_no_chain(plugins):
    assert build_chain({"name": "c"}, plugins) is None
    assert build_chain({"transforms": ""}, plugins) is None


def test_a_failing_transform_names_the_alias_and_the_record(plugins):
    chain = build_chain({"transforms": "mask", "transforms.mask.type": "MaskField$Value",
                         "transforms.mask.fields": "a"}, plugins)
    with pytest.raises(TransformError) as failure:
        chain.apply(record(b"plain text", offset=41))
    message = str(failure.value)
    assert "Transform mask (MaskFieldValue)" in message
    assert "from topic orders partition 2 offset 41" in message
    assert "bound for topic A.orders partition 2" in message
    assert isinstance(failure.value.__cause__, DataError)


def test_build_chain_raises_config_error_listing_every_problem(plugins):
    with pytest.raises(ConfigError) as failure:
        build_chain({"transforms": "a,b", "transforms.a.type": "Nope", "transforms.b.type": "RegexRouter"}, plugins)
    assert "transforms.a.type" in str(failure.value) and "transforms.b.regex" in str(failure.value)


# -- validation (PUT /connector-plugins/{plugin}/config/validate) -----------------------------------

def test_validation_reports_each_problem_on_its_field(plugins):
    config = {
        "name": "c", "connector.class": "MirrorSourceConnector",
        "source.cluster.alias": "A", "target.cluster.alias": "B",
        "transforms": "bad,route,drop,neg", "predicates": "p,q",
        "transforms.bad.type": "com.example.Nope",
        "transforms.route.type": f"{JAVA}RegexRouter", "transforms.route.regex": "([a-z",
        "transforms.route.replacement": "x",
        "transforms.drop.type": "Filter", "transforms.drop.predicate": "missing",
        "transforms.neg.type": "Filter", "transforms.neg.negate": "true",
        "predicates.p.type": "HasHeaderKey",
    }
    connector = plugins.connector_class("MirrorSourceConnector")
    infos = _config_infos("x", connector, config, plugins)
    errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]["errors"]}
    assert "Class com.example.Nope could not be found" in errors["transforms.bad.type"][0]
    assert errors["transforms.route.regex"][0].startswith(
        "Invalid value ([a-z for configuration transforms.route.regex")
    assert "no predicate with alias missing" in errors["transforms.drop.predicate"][0]
    assert "there is no config 'transforms.neg.predicate'" in errors["transforms.neg.negate"][0]
    assert errors["predicates.p.name"] == ['Missing required configuration "predicates.p.name" which has no '
                                           'default value.']
    assert errors["predicates.q.type"] == ['Missing required configuration "predicates.q.type" which has no '
                                           'default value.']
    assert infos["error_count"] == 6
    assert {"Transforms", "Predicates", "Transforms: route", "Predicates: p"} <= set(infos["groups"])
    definitions = {c["definition"]["name"]: c["definition"] for c in infos["configs"]}
    assert definitions["transforms.route.regex"]["group"] == "Transforms: route"
    assert definitions["transforms.route.type"]["type"] == "CLASS"
    with pytest.raises(Exception, match="transforms.route.regex"):
        validate_or_raise(plugins, config)


def test_duplicate_aliases_are_refused(plugins):
    connector = plugins.connector_class("MirrorSourceConnector")
    infos = _config_infos("x", connector, {"name": "c", "connector.class": "MirrorSourceConnector",
                                           "source.cluster.alias": "A", "target.cluster.alias": "B",
                                           "transforms": "f,f", "transforms.f.type": "Filter"}, plugins)
    errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]["errors"]}
    assert errors == {"transforms": ["Invalid value f,f for configuration transforms: Duplicate alias provided."]}


def test_a_transforms_password_settings_are_secrets(plugins):
    from mirrorline.api import ConfigDef, ConfigKey, Transformation, Type

    class Keyed(Transformation):
        config_def = ConfigDef([ConfigKey("signing.key", Type.PASSWORD)])

        def configure(self, config):
            assert isinstance(config["signing.key"], Password)

        def apply(self, record):
            return record

    registry = PluginRegistry.discover()
    registry.transforms.add(Keyed)
    config = {"transforms": "k", "transforms.k.type": "Keyed", "transforms.k.signing.key": "s3cret"}
    assert redact(config, transform_config_def(config, registry))["transforms.k.signing.key"] == HIDDEN
    assert build_chain(config, registry) is not None


def test_a_bad_plugin_class_is_a_load_failure_not_a_crash():
    import pluggy

    from mirrorline.api import hookimpl, hookspecs

    class Bad:
        @staticmethod
        @hookimpl
        def register_transforms():
            return [dict]

    manager = pluggy.PluginManager("mirrorline")
    manager.add_hookspecs(hookspecs)
    manager.register(Bad(), name="bad")
    registry = PluginRegistry(manager)
    registry.refresh()
    assert registry.transforms.all() == {}
    assert "is not a Transformation subclass" in registry.failures[0].error
