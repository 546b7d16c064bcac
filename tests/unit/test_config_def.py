"""Unit tests of mirrorline.api.config: ConfigKey/ConfigDef parsing, validation and self-description."""

from __future__ import annotations

import math

import pytest

from mirrorline.api.config import (
    NO_DEFAULT,
    Config,
    ConfigDef,
    ConfigKey,
    Importance,
    NonEmptyString,
    OneOf,
    Password,
    Range,
    RegexList,
    Type,
    Validator,
    format_value,
    split_list,
)
from mirrorline.api.errors import ConfigError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def parse_one(type_: Type, raw, **kwargs):
    """Parse one raw value as a required key of ``type_``."""
    return ConfigDef([ConfigKey("k", type_, **kwargs)]).parse({"k": raw})["k"]


def errors_of(type_: Type, raw, **kwargs) -> list[str]:
    (value,) = ConfigDef([ConfigKey("k", type_, **kwargs)]).validate({"k": raw})
    return value.errors


# ---------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ("hello", "hello"),
    ("  padded  ", "padded"),  # Kafka trims STRING values
    ("", ""),
    ("a=b, c", "a=b, c"),
])
def test_string(raw, expected):
    assert parse_one(Type.STRING, raw) == expected


@pytest.mark.parametrize("type_, raw, expected", [
    (Type.INT, "0", 0),
    (Type.INT, " 42 ", 42),
    (Type.INT, "-7", -7),
    (Type.INT, str(INT_MAX), INT_MAX),
    (Type.INT, str(INT_MIN), INT_MIN),
    (Type.INT, 12, 12),
    (Type.INT, 3.0, 3),
    (Type.LONG, str(LONG_MAX), LONG_MAX),
    (Type.LONG, str(LONG_MIN), LONG_MIN),
    (Type.LONG, str(INT_MAX + 1), INT_MAX + 1),
    (Type.LONG, 60000, 60000),
])
def test_integers_valid(type_, raw, expected):
    value = parse_one(type_, raw)
    assert value == expected and type(value) is int


@pytest.mark.parametrize("type_, raw", [
    (Type.INT, str(INT_MAX + 1)),
    (Type.INT, str(INT_MIN - 1)),
    (Type.LONG, str(LONG_MAX + 1)),
    (Type.LONG, str(LONG_MIN - 1)),
    (Type.INT, "abc"),
    (Type.INT, "1.5"),
    (Type.INT, 1.5),
    (Type.INT, ""),
    (Type.INT, True),
    (Type.LONG, "12ms"),
])
def test_integers_invalid(type_, raw):
    errors = errors_of(type_, raw)
    assert len(errors) == 1
    assert errors[0].startswith(f"Invalid value {raw} for configuration k")


def test_int_range_error_says_why():
    (error,) = errors_of(Type.INT, str(INT_MAX + 1))
    assert "32-bit" in error
    (error,) = errors_of(Type.LONG, str(LONG_MAX + 1))
    assert "64-bit" in error


@pytest.mark.parametrize("raw, expected", [
    ("1.5", 1.5),
    (" -2 ", -2.0),
    ("1e3", 1000.0),
    (7, 7.0),
])
def test_double(raw, expected):
    value = parse_one(Type.DOUBLE, raw)
    assert value == expected and isinstance(value, float)


def test_double_invalid():
    assert errors_of(Type.DOUBLE, "one point five")


def test_double_nan_parses():
    assert math.isnan(parse_one(Type.DOUBLE, "NaN"))


@pytest.mark.parametrize("raw, expected", [
    ("true", True), ("false", False), ("TRUE", True), ("False", False), (" true ", True),
    (True, True), (False, False),
])
def test_boolean(raw, expected):
    assert parse_one(Type.BOOLEAN, raw) is expected


@pytest.mark.parametrize("raw", ["yes", "1", "0", "", "t", "truee"])
def test_boolean_invalid(raw):
    (error,) = errors_of(Type.BOOLEAN, raw)
    assert "expected true or false" in error


@pytest.mark.parametrize("raw, expected", [
    ("a,b,c", ["a", "b", "c"]),
    ("a , b ,c", ["a", "b", "c"]),
    ("  a,b  ", ["a", "b"]),
    ("single", ["single"]),
    ("", []),
    ("   ", []),
    ("a,,b", ["a", "", "b"]),
    ("a b,c", ["a b", "c"]),
    (["x", " y "], ["x", "y"]),
    (("x",), ["x"]),
])
def test_list(raw, expected):
    assert parse_one(Type.LIST, raw) == expected


@pytest.mark.parametrize("raw, expected", [("", []), (" ", []), ("a, b", ["a", "b"]), ("a", ["a"])])
def test_split_list(raw, expected):
    assert split_list(raw) == expected


def test_class_kept_as_string():
    assert parse_one(Type.CLASS, " org.apache.kafka.connect.converters.ByteArrayConverter ") == \
        "org.apache.kafka.connect.converters.ByteArrayConverter"


def test_password_is_hidden_everywhere_but_value():
    secret = "hunter2"
    value = parse_one(Type.PASSWORD, secret)
    assert isinstance(value, Password)
    assert value.value == secret
    assert str(value) == repr(value) == "[hidden]"
    assert f"{value}" == "[hidden]"
    assert secret not in repr([value]) and secret not in repr({"k": value})
    assert format_value(value, Type.PASSWORD) == "[hidden]"
    assert format_value(secret, Type.PASSWORD) == "[hidden]"  # even a raw string is hidden
    assert format_value(None, Type.PASSWORD) is None
    assert value == Password(secret) and value != Password("other") and value != secret
    assert hash(value) == hash(Password(secret))
    # an already-wrapped Password passes through unchanged
    assert parse_one(Type.PASSWORD, value) is value


def test_password_secret_not_in_parsed_config_repr_or_key_info():
    definition = ConfigDef([ConfigKey("sasl.password", Type.PASSWORD, default="s3cret")])
    config = definition.parse({})
    assert "s3cret" not in repr(config)
    assert config["sasl.password"].value == "s3cret"
    assert definition.keys["sasl.password"].info()["default_value"] == "[hidden]"
    (result,) = definition.validate({"sasl.password": "given"})
    assert result.info(Type.PASSWORD)["value"] == "[hidden]"


def test_password_secret_not_in_validation_errors():
    class AtLeast8(Validator):
        def __call__(self, name, value):
            if len(value.value) < 8:
                raise ValueError("must be at least 8 characters")

    definition = ConfigDef([ConfigKey("pw", Type.PASSWORD, validator=AtLeast8())])
    (result,) = definition.validate({"pw": "short"})
    assert result.errors and all("short" not in error for error in result.errors)
    with pytest.raises(ConfigError) as info:
        definition.parse({"pw": "short"})
    assert "short" not in str(info.value)
    assert "[hidden]" in str(info.value)
    assert "must be at least 8 characters" in str(info.value)


@pytest.mark.parametrize("value, type_, expected", [
    (True, Type.BOOLEAN, "true"),
    (False, Type.BOOLEAN, "false"),
    (["a", "b"], Type.LIST, "a,b"),
    ([], Type.LIST, ""),
    (5, Type.INT, "5"),
    (1.5, Type.DOUBLE, "1.5"),
    (None, Type.STRING, None),
    (NO_DEFAULT, Type.STRING, None),
    ("x", Type.STRING, "x"),
])
def test_format_value(value, type_, expected):
    assert format_value(value, type_) == expected


# ---------------------------------------------------------------------------------------
# Required keys and defaults
# ---------------------------------------------------------------------------------------

def test_required_key_missing():
    definition = ConfigDef([ConfigKey("topic", Type.STRING)])
    assert definition.keys["topic"].required
    with pytest.raises(ConfigError, match='Missing required configuration "topic" which has no default value.'):
        definition.parse({})
    (result,) = definition.validate({})
    assert result.errors == ['Missing required configuration "topic" which has no default value.']


def test_required_key_given():
    assert ConfigDef([ConfigKey("topic", Type.STRING)]).parse({"topic": "t"})["topic"] == "t"


@pytest.mark.parametrize("type_, default, expected", [
    (Type.INT, 100, 100),
    (Type.INT, "100", 100),
    (Type.BOOLEAN, "true", True),
    (Type.BOOLEAN, False, False),
    (Type.LIST, "", []),
    (Type.LIST, "a, b", ["a", "b"]),
    (Type.LIST, ["x"], ["x"]),
    (Type.STRING, None, None),
    (Type.DOUBLE, "0.5", 0.5),
])
def test_defaults(type_, default, expected):
    key = ConfigKey("k", type_, default=default)
    assert not key.required
    assert key.default_value() == expected
    assert ConfigDef([key]).parse({})["k"] == expected


def test_given_value_overrides_default():
    definition = ConfigDef([ConfigKey("n", Type.INT, default=1)])
    assert definition.parse({"n": "5"})["n"] == 5


def test_none_default_is_optional_and_none():
    key = ConfigKey("k", Type.STRING, default=None)
    assert not key.required
    assert ConfigDef([key]).parse({})["k"] is None
    assert key.info()["default_value"] is None


def test_broken_string_default_reported_not_raised():
    definition = ConfigDef([ConfigKey("n", Type.INT, default="many")])
    (result,) = definition.validate({})
    assert result.errors and "Invalid default for configuration n" in result.errors[0]


def test_validator_runs_on_string_default_but_not_on_typed_default():
    # documented: validators do not run on a default given as a typed value
    assert ConfigKey("n", Type.INT, default=0, validator=Range(min=1)).default_value() == 0
    (result,) = ConfigDef([ConfigKey("n", Type.INT, default="0", validator=Range(min=1))]).validate({})
    assert result.errors


# ---------------------------------------------------------------------------------------
# Validators
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("validator, value, ok", [
    (Range(min=1), 1, True),
    (Range(min=1), 0, False),
    (Range(max=5), 5, True),
    (Range(max=5), 6, False),
    (Range(1, 5), 3, True),
    (Range(1, 5), 0, False),
    (Range(1, 5), 6, False),
    (Range(), -10**9, True),
    (Range(min=1), None, True),
    (Range(min=0.5), 0.25, False),
])
def test_range(validator, value, ok):
    if ok:
        validator("k", value)
    else:
        with pytest.raises(ValueError):
            validator("k", value)


def test_range_messages():
    with pytest.raises(ValueError, match="must be at least 1"):
        Range(min=1)("k", 0)
    with pytest.raises(ValueError, match="must be no more than 5"):
        Range(max=5)("k", 6)


@pytest.mark.parametrize("validator, text", [
    (Range(min=1), "[1,...]"),
    (Range(max=5), "[...,5]"),
    (Range(1, 5), "[1,...,5]"),
    (Range(-1, 100000), "[-1,...,100000]"),
    (Range(), "[...]"),
    (Range(min=0.5), "[0.5,...]"),
])
def test_range_str_matches_kafka(validator, text):
    assert str(validator) == text


def test_range_through_config_def():
    definition = ConfigDef([ConfigKey("tasks.max", Type.INT, default=1, validator=Range(min=1))])
    assert definition.parse({"tasks.max": "3"})["tasks.max"] == 3
    with pytest.raises(ConfigError, match="Invalid value 0 for configuration tasks.max: must be at least 1"):
        definition.parse({"tasks.max": "0"})


def test_one_of():
    validator = OneOf(("earliest", "latest"))
    validator("k", "latest")
    validator("k", None)
    with pytest.raises(ValueError, match="must be one of earliest, latest"):
        validator("k", "LATEST")
    OneOf(("earliest", "latest"), ignore_case=True)("k", "LATEST")
    with pytest.raises(ValueError):
        OneOf(("earliest", "latest"), ignore_case=True)("k", "middle")
    assert validator.recommended_values() == ["earliest", "latest"]
    assert str(validator) == "[earliest, latest]"


def test_one_of_recommended_values_in_validate():
    definition = ConfigDef([ConfigKey("reset", Type.STRING, default="latest",
                                      validator=OneOf(("earliest", "latest")))])
    (result,) = definition.validate({"reset": "sideways"})
    assert result.recommended_values == ["earliest", "latest"]
    assert result.errors == ["Invalid value sideways for configuration reset: must be one of earliest, latest"]
    assert result.value == "sideways"


@pytest.mark.parametrize("value, ok", [("x", True), (" x ", True), ("", False), ("   ", False), (None, False)])
def test_non_empty_string(value, ok):
    if ok:
        NonEmptyString()("k", value)
    else:
        with pytest.raises(ValueError, match="must not be empty"):
            NonEmptyString()("k", value)


def test_non_empty_string_through_config_def():
    definition = ConfigDef([ConfigKey("name", Type.STRING, validator=NonEmptyString())])
    with pytest.raises(ConfigError, match="for configuration name: must not be empty"):
        definition.parse({"name": "  "})


def test_regex_list():
    validator = RegexList()
    validator("k", ["topic-.*", "^a$", ".*"])
    validator("k", [])
    validator("k", None)
    with pytest.raises(ValueError) as info:
        validator("k", ["ok.*", "bad(", "also[bad"])
    assert "'bad('" in str(info.value)
    assert "invalid regular expression" in str(info.value)


def test_regex_list_through_config_def_names_the_pattern():
    definition = ConfigDef([ConfigKey("topics", Type.LIST, default=".*", validator=RegexList())])
    assert definition.parse({"topics": "a.*, b"})["topics"] == ["a.*", "b"]
    with pytest.raises(ConfigError) as info:
        definition.parse({"topics": "fine, [unclosed"})
    message = str(info.value)
    assert "topics" in message and "[unclosed" in message


def test_custom_validator():
    class Even(Validator):
        def __call__(self, name, value):
            if value % 2:
                raise ValueError("must be even")

        def __str__(self):
            return "an even number"

    definition = ConfigDef([ConfigKey("n", Type.INT, validator=Even())])
    assert definition.parse({"n": "4"})["n"] == 4
    with pytest.raises(ConfigError, match="must be even"):
        definition.parse({"n": "3"})
    assert "an even number" in definition.to_markdown()
    assert Even().recommended_values() == []


# ---------------------------------------------------------------------------------------
# ConfigDef.parse / validate
# ---------------------------------------------------------------------------------------

def test_parse_lists_all_errors():
    definition = ConfigDef([
        ConfigKey("topic", Type.STRING),
        ConfigKey("tasks", Type.INT, default=1, validator=Range(min=1)),
        ConfigKey("flag", Type.BOOLEAN, default=False),
        ConfigKey("patterns", Type.LIST, default="", validator=RegexList()),
        ConfigKey("ok", Type.STRING, default="fine"),
    ])
    with pytest.raises(ConfigError) as info:
        definition.parse({"tasks": "0", "flag": "maybe", "patterns": "(", "ok": "x"})
    message = str(info.value)
    assert info.value.http_status == 400
    for fragment in ('Missing required configuration "topic"', "configuration tasks", "configuration flag",
                     "configuration patterns"):
        assert fragment in message
    assert "configuration ok" not in message
    assert message.count("; ") == 3


def test_validate_never_raises_and_returns_one_value_per_key_in_order():
    definition = ConfigDef([
        ConfigKey("b", Type.INT),
        ConfigKey("a", Type.INT, default=2),
        ConfigKey("c", Type.BOOLEAN, default="true"),
    ])
    results = definition.validate({"b": "x", "c": "false", "undeclared": "1"})
    assert [r.name for r in results] == ["b", "a", "c"]
    assert results[0].errors and results[0].value == "x"
    assert results[1].errors == [] and results[1].value == 2
    assert results[2].errors == [] and results[2].value is False


def test_config_value_info_shape():
    (result,) = ConfigDef([ConfigKey("flag", Type.BOOLEAN, default=True)]).validate({})
    assert result.info(Type.BOOLEAN) == {
        "name": "flag", "value": "true", "recommended_values": [], "errors": [], "visible": True,
    }


def test_parse_returns_config_with_typed_values_and_originals():
    definition = ConfigDef([ConfigKey("n", Type.INT, default=1), ConfigKey("s", Type.STRING, default="x")])
    raw = {"n": "3", "extra": "kept"}
    config = definition.parse(raw)
    assert isinstance(config, Config)
    assert dict(config) == {"n": 3, "s": "x"}
    assert len(config) == 2 and list(config) == ["n", "s"]
    assert "extra" not in config
    assert config.originals == raw
    assert config.originals is not raw
    assert repr(config) == "Config({'n': 3, 's': 'x'})"
    with pytest.raises(KeyError):
        config["extra"]


def test_config_with_prefix():
    config = Config({}, {
        "source.cluster.bootstrap.servers": "a:9092",
        "source.cluster.security.protocol": "SSL",
        "target.cluster.bootstrap.servers": "b:9092",
        "source.cluster.": "empty-rest",
        "topics": ".*",
    })
    assert config.with_prefix("source.cluster.") == {
        "bootstrap.servers": "a:9092", "security.protocol": "SSL", "": "empty-rest",
    }
    assert config.with_prefix("nothing.") == {}
    assert config.with_prefix("") == config.originals


def test_define_replaces_and_merged_keeps_order():
    first = ConfigDef([ConfigKey("a", Type.STRING, default="1"), ConfigKey("b", Type.STRING, default="1")])
    second = ConfigDef([ConfigKey("b", Type.INT, default=2), ConfigKey("c", Type.STRING, default="3")])
    merged = first.merged(second)
    assert list(merged.keys) == ["a", "b", "c"]
    assert merged.keys["b"].type is Type.INT
    assert list(first.keys) == ["a", "b"]  # unchanged
    assert first.define(ConfigKey("a", Type.LONG, default=1)) is first
    assert first.keys["a"].type is Type.LONG


def test_groups_in_declaration_order():
    definition = ConfigDef([
        ConfigKey("a", Type.STRING, default="", group="Common"),
        ConfigKey("b", Type.STRING, default=""),
        ConfigKey("c", Type.STRING, default="", group="Source"),
        ConfigKey("d", Type.STRING, default="", group="Common"),
    ])
    assert definition.groups() == ["Common", "Source"]


# ---------------------------------------------------------------------------------------
# Self-description: ConfigKeyInfo and Markdown
# ---------------------------------------------------------------------------------------

CONFIG_KEY_INFO_FIELDS = {"name", "type", "required", "default_value", "importance", "documentation", "group",
                          "order", "width", "display_name", "dependents"}


def test_key_info_field_set_matches_connect_config_key_info():
    info = ConfigKey("x", Type.STRING).info()
    assert set(info) == CONFIG_KEY_INFO_FIELDS


def test_key_info_required_key():
    key = ConfigKey("topic", Type.STRING, importance=Importance.HIGH, doc="Topic to write to.",
                    group="Sequence", order=1, display_name="Topic", dependents=("a", "b"))
    assert key.info() == {
        "name": "topic", "type": "STRING", "required": True, "default_value": None, "importance": "HIGH",
        "documentation": "Topic to write to.", "group": "Sequence", "order": 1, "width": "NONE",
        "display_name": "Topic", "dependents": ["a", "b"],
    }


@pytest.mark.parametrize("key, default_value", [
    (ConfigKey("k", Type.INT, default=100), "100"),
    (ConfigKey("k", Type.BOOLEAN, default="true"), "true"),
    (ConfigKey("k", Type.BOOLEAN, default=False), "false"),
    (ConfigKey("k", Type.LIST, default="a , b"), "a,b"),
    (ConfigKey("k", Type.LIST, default=""), ""),
    (ConfigKey("k", Type.STRING, default=None), None),
    (ConfigKey("k", Type.PASSWORD, default="secret"), "[hidden]"),
    (ConfigKey("k", Type.CLASS, default="a.B"), "a.B"),
])
def test_key_info_defaults(key, default_value):
    info = key.info()
    assert info["required"] is False
    assert info["default_value"] == default_value


def test_key_info_defaults_for_optional_metadata():
    info = ConfigKey("k", Type.LONG, default=1).info()
    assert info["importance"] == "MEDIUM"
    assert info["documentation"] == ""
    assert info["group"] is None
    assert info["order"] == -1
    assert info["display_name"] == "k"
    assert info["dependents"] == []


def test_to_markdown_contains_every_key():
    definition = ConfigDef([
        ConfigKey("topic", Type.STRING, importance=Importance.HIGH, doc="Topic | to write to.",
                  validator=NonEmptyString()),
        ConfigKey("tasks.max", Type.INT, default=1, validator=Range(min=1), doc="Most tasks."),
        ConfigKey("topics", Type.LIST, default=".*", validator=RegexList(), doc="Topics\nto mirror."),
        ConfigKey("password", Type.PASSWORD, default="s3cret", importance=Importance.LOW),
        ConfigKey("reset", Type.STRING, default="latest", validator=OneOf(("earliest", "latest"))),
    ])
    markdown = definition.to_markdown(title="Example")
    lines = markdown.splitlines()
    assert lines[0] == "### Example"
    assert "| Name | Type | Default | Valid values | Importance | Description |" in lines
    for name in definition.keys:
        assert sum(f"| `{name}` |" in line for line in lines) == 1, name
    row = next(line for line in lines if line.startswith("| `tasks.max` |"))
    assert row == "| `tasks.max` | INT | `1` | [1,...] | medium | Most tasks. |"
    assert "| `topic` | STRING | (required) | non-empty string | high | Topic \\| to write to. |" in lines
    assert "Topics to mirror." in markdown
    assert "s3cret" not in markdown and "`[hidden]`" in markdown
    assert "[earliest, latest]" in markdown
    assert markdown.endswith("\n")


def test_to_markdown_without_title():
    markdown = ConfigDef([ConfigKey("a", Type.STRING, default="x")]).to_markdown()
    assert markdown.startswith("| Name |")
