"""Unit tests of mirrorline.clients.configfile: Java .properties, YAML and Connect-shaped JSON config files."""

from __future__ import annotations

import json
import os

import pytest

from mirrorline.api.errors import ConfigError
from mirrorline.clients.configfile import load_config_file, parse_properties, parse_yaml


def write(tmp_path, name: str, text: str | bytes):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def load_props(tmp_path, text: str) -> dict[str, str]:
    return load_config_file(write(tmp_path, "test.properties", text))


# ---------------------------------------------------------------------------------------
# .properties (java.util.Properties semantics)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    # separators
    ("a=b", {"a": "b"}),
    ("a:b", {"a": "b"}),
    ("a b", {"a": "b"}),
    ("a\tb", {"a": "b"}),
    ("a = b", {"a": "b"}),
    ("a : b", {"a": "b"}),
    ("a    b", {"a": "b"}),
    ("a\t=\tb", {"a": "b"}),
    ("  a=b", {"a": "b"}),  # leading whitespace is skipped
    ("a=b=c", {"a": "b=c"}),  # only the first separator counts
    ("a:=b", {"a": "=b"}),
    ("a = = b", {"a": "= b"}),
    ("a==b", {"a": "=b"}),
    ("url=http://host:8083/x", {"url": "http://host:8083/x"}),
    ("a=", {"a": ""}),
    ("a", {"a": ""}),
    ("a   ", {"a": ""}),
    ("a=b  ", {"a": "b  "}),  # trailing whitespace is kept, as Java does
    # comments: only whole lines, # or !
    ("# a=b\nc=d", {"c": "d"}),
    ("! a=b\nc=d", {"c": "d"}),
    ("   # indented comment\nc=d", {"c": "d"}),
    ("a=b # c", {"a": "b # c"}),
    ("a=b ! c", {"a": "b ! c"}),
    ("a=#b", {"a": "#b"}),
    ("#comment ending in backslash \\\na=b", {"a": "b"}),  # comments never continue
    # blank lines
    ("\n\n  \na=b\n\n\t\nc=d\n", {"a": "b", "c": "d"}),
    ("", {}),
    ("# only a comment", {}),
    # later keys win
    ("a=1\na=2", {"a": "2"}),
    ("a=1\nb=x\na=3", {"a": "3", "b": "x"}),
    # line continuation; leading whitespace of continuation lines is skipped
    ("a=one,\\\n    two,\\\n\tthree", {"a": "one,two,three"}),
    ("a=b\\\n# not a comment", {"a": "b# not a comment"}),
    ("key\\\n  name=v", {"keyname": "v"}),
    ("a=b\\\n\nc=d", {"a": "b", "c": "d"}),  # an empty line ends the continuation
    ("a=b\\", {"a": "b"}),  # continuation at end of file
    ("a=b\\\\", {"a": "b\\"}),  # an escaped backslash does not continue
    ("a=b\\\\\\\nc", {"a": "b\\c"}),  # three backslashes: one escaped, one continuation
    # escapes
    ("a=x\\ty", {"a": "x\ty"}),
    ("a=x\\ny", {"a": "x\ny"}),
    ("a=x\\ry", {"a": "x\ry"}),
    ("a=x\\fy", {"a": "x\fy"}),
    ("a=\\u00e9t\\u00E9", {"a": "été"}),
    ("a=\\u0041\\u0042", {"a": "AB"}),
    ("a=x\\\\y", {"a": "x\\y"}),
    ("a=\\q", {"a": "q"}),  # an unknown escape is the character itself
    ("a=\\ leading", {"a": " leading"}),
    ("a=\\#not", {"a": "#not"}),
    ("\\#a=b", {"#a": "b"}),
    # escaped separators in keys
    ("a\\=b=c", {"a=b": "c"}),
    ("a\\:b:c", {"a:b": "c"}),
    ("a\\ b c", {"a b": "c"}),
    ("a\\=\\:\\ b = v", {"a=: b": "v"}),
    ("\\u0041key=v", {"Akey": "v"}),
    # line endings
    ("a=b\r\nc=d\r\n", {"a": "b", "c": "d"}),
    ("a=b\rc=d", {"a": "b", "c": "d"}),
])
def test_properties(tmp_path, text, expected):
    assert load_props(tmp_path, text) == expected
    assert parse_properties(text) == expected


def test_properties_worker_config(tmp_path):
    text = """\
# A worker config as Kafka ships it
bootstrap.servers=localhost:9092
key.converter=org.apache.kafka.connect.json.JsonConverter
offset.storage.file.filename=/tmp/connect.offsets
offset.flush.interval.ms=10000
listeners = http://127.0.0.1:8083
plugin.path=/usr/share/java,\\
        /opt/connectors
"""
    assert load_props(tmp_path, text) == {
        "bootstrap.servers": "localhost:9092",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "offset.storage.file.filename": "/tmp/connect.offsets",
        "offset.flush.interval.ms": "10000",
        "listeners": "http://127.0.0.1:8083",
        "plugin.path": "/usr/share/java,/opt/connectors",
    }


def test_properties_jaas_config(tmp_path):
    text = ('sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n'
            '    username="alice" password="a=b:c";\n')
    assert load_props(tmp_path, text) == {
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="alice" password="a=b:c";'}


@pytest.mark.parametrize("text", [
    "a=\\u",
    "a=\\u12",
    "a=\\u12G4",
    "a=\\uZZZZ",
    "a=x\\u00",
    "\\u00=v",
])
def test_properties_malformed_unicode_escape(tmp_path, text):
    path = write(tmp_path, "bad.properties", text)
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value)
    assert "\\uXXXX" in str(info.value)


def test_properties_unicode_escape_followed_by_hex_digits():
    # exactly four hex digits form the escape; a fifth is an ordinary character
    assert parse_properties("a=\\u00411") == {"a": "A1"}


def test_properties_utf8_file(tmp_path):
    assert load_props(tmp_path, "greeting=héllo wörld\n") == {"greeting": "héllo wörld"}


def test_unknown_suffix_is_read_as_properties(tmp_path):
    assert load_config_file(write(tmp_path, "worker.conf", "a=b")) == {"a": "b"}
    assert load_config_file(write(tmp_path, "noext", "a: b")) == {"a": "b"}


# ---------------------------------------------------------------------------------------
# YAML
# ---------------------------------------------------------------------------------------

def test_yaml_flattening(tmp_path):
    text = """\
name: mirror
tasks.max: 4
producer:
  linger.ms: 5
  compression:
    type: lz4
enabled: true
disabled: false
yes_as_string: "yes"
topics: [a, b.*, c]
empty_list: []
nothing: null
tilde: ~
ratio: 0.5
quoted: "007"
"""
    for name in ("c.yaml", "c.yml", "c.YAML"):
        assert load_config_file(write(tmp_path, name, text)) == {
            "name": "mirror",
            "tasks.max": "4",
            "producer.linger.ms": "5",
            "producer.compression.type": "lz4",
            "enabled": "true",
            "disabled": "false",
            "yes_as_string": "yes",
            "topics": "a,b.*,c",
            "empty_list": "",
            "nothing": "",
            "tilde": "",
            "ratio": "0.5",
            "quoted": "007",
        }


def test_yaml_list_items_formatted_as_scalars():
    assert parse_yaml("flags: [true, false]\nmixed: [1, x, 2.5]") == {"flags": "true,false", "mixed": "1,x,2.5"}


def test_yaml_block_list_and_non_string_keys():
    assert parse_yaml("topics:\n  - one\n  - two\n1: x\n") == {"topics": "one,two", "1": "x"}


def test_yaml_values_are_all_strings():
    flattened = parse_yaml("a: 1\nb: {c: true, d: [1, 2]}\ne: null")
    assert all(isinstance(v, str) for v in flattened.values())


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_empty_yaml_is_empty(tmp_path, text):
    assert load_config_file(write(tmp_path, "empty.yaml", text)) == {}


@pytest.mark.parametrize("text", ["a: [unclosed", "a: b\n  c: d\n: :", "key: 'unterminated", "\ta: b"])
def test_invalid_yaml(tmp_path, text):
    path = write(tmp_path, "broken.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    message = str(info.value)
    assert str(path) in message and "not valid YAML" in message
    assert "\n" not in message


@pytest.mark.parametrize("text, kind", [("- a\n- b\n", "list"), ("just a string", "str"), ("42", "int")])
def test_non_mapping_yaml(tmp_path, text, kind):
    path = write(tmp_path, "list.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value)
    assert f"expected a mapping of settings, got {kind}" in str(info.value)


# ---------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------

def test_json_connect_shape(tmp_path):
    body = {"name": "ticks", "config": {"connector.class": "TickSource", "topic": "ticks", "tasks.max": 2,
                                        "enabled": True}}
    assert load_config_file(write(tmp_path, "ticks.json", json.dumps(body))) == {
        "connector.class": "TickSource", "topic": "ticks", "tasks.max": "2", "enabled": "true", "name": "ticks",
    }


def test_json_connect_shape_name_inside_config_wins(tmp_path):
    body = {"name": "outer", "config": {"name": "inner", "topic": "t"}}
    assert load_config_file(write(tmp_path, "c.json", json.dumps(body)))["name"] == "inner"


def test_json_connect_shape_without_name(tmp_path):
    assert load_config_file(write(tmp_path, "c.json", json.dumps({"config": {"topic": "t"}}))) == \
        {"topic": "t", "name": ""}


def test_json_flat_map(tmp_path):
    body = {"connector.class": "TickSource", "name": "ticks", "topic": "t"}
    assert load_config_file(write(tmp_path, "flat.json", json.dumps(body))) == body


def test_json_indented_with_tabs(tmp_path):
    # tabs are valid JSON whitespace (though not valid YAML indentation)
    text = json.dumps({"name": "ticks", "config": {"topic": "t"}}, indent="\t")
    assert "\t" in text
    assert load_config_file(write(tmp_path, "tabs.json", text)) == {"topic": "t", "name": "ticks"}


def test_json_escapes(tmp_path):
    text = '{"name": "n", "config": {"path": "a\\/b", "e": "\\u00e9", "nl": "x\\ny"}}'
    assert load_config_file(write(tmp_path, "esc.json", text)) == \
        {"path": "a/b", "e": "é", "nl": "x\ny", "name": "n"}


@pytest.mark.parametrize("text", ['{"name": "x", "config": {', "{'single': 'quotes'}", '{"a": 1,}'])
def test_invalid_json(tmp_path, text):
    path = write(tmp_path, "broken.json", text)
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value)


def test_json_non_object(tmp_path):
    path = write(tmp_path, "list.json", '["a", "b"]')
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value)


# ---------------------------------------------------------------------------------------
# Unreadable files
# ---------------------------------------------------------------------------------------

def test_missing_file(tmp_path):
    path = tmp_path / "nope" / "worker.properties"
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value)
    assert "cannot read config file" in str(info.value)
    assert "No such file" in str(info.value)


def test_directory_instead_of_file(tmp_path):
    path = tmp_path / "dir.properties"
    path.mkdir()
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can read any file")
def test_permission_denied(tmp_path):
    path = write(tmp_path, "secret.properties", "a=b")
    path.chmod(0)
    try:
        with pytest.raises(ConfigError) as info:
            load_config_file(path)
        assert str(path) in str(info.value)
    finally:
        path.chmod(0o600)


@pytest.mark.parametrize("name", ["binary.properties", "binary.yaml", "binary.json"])
def test_undecodable_file(tmp_path, name):
    path = write(tmp_path, name, b"a=\xff\xfe\x00\x81")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value)


def test_accepts_str_path(tmp_path):
    path = write(tmp_path, "a.properties", "x=y")
    assert load_config_file(str(path)) == {"x": "y"}
