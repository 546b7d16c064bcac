"""The JAAS configuration parser behind ``sasl.jaas.config``."""

from __future__ import annotations

import pytest

from mirrorline.api import ConfigError
from mirrorline.clients.jaas import LoginModule, parse_jaas_config, quote_jaas_value, single_login_module

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_scram_module_with_quoted_options():
    module = single_login_module(f'{SCRAM} required username="mirror" password="s3cr=t;";')
    assert module == LoginModule(SCRAM, "required", {"username": "mirror", "password": "s3cr=t;"})
    assert module.simple_name == "ScramLoginModule"


@pytest.mark.parametrize("text, options", [
    (f'{PLAIN} required\n  username = "carol"\n  password = "p w";', {"username": "carol", "password": "p w"}),
    (f'{PLAIN} REQUIRED password="first" username="dave";', {"password": "first", "username": "dave"}),
    (f'{PLAIN} required username="" password="";', {"username": "", "password": ""}),
    (f'{PLAIN} required username=alice password=al1ce-$ecret.x;', {"username": "alice", "password": "al1ce-$ecret.x"}),
    (f'{PLAIN} required username="a\\"b" password="back\\\\slash";', {"username": 'a"b', "password": "back\\slash"}),
    (f"{PLAIN} required username='single' password='q\"uote';", {"username": "single", "password": 'q"uote'}),
    (f'{PLAIN} required /* a comment */ username="u" // to the end of the line\n password="p";',
     {"username": "u", "password": "p"}),
    (f'{PLAIN} required username="tab\\there";', {"username": "tab\there"}),
    (f"{SCRAM} required;", {}),
])
def test_options(text, options):
    assert parse_jaas_config(text)[0].options == options


def test_control_flags_and_several_modules():
    modules = parse_jaas_config(f'{PLAIN} optional username="a"; {SCRAM} Sufficient;')
    assert [(m.simple_name, m.control_flag) for m in modules] == [("PlainLoginModule", "optional"),
                                                                  ("ScramLoginModule", "sufficient")]
    with pytest.raises(ConfigError, match=r"^sasl\.jaas\.config: must contain exactly one login module, found 2$"):
        single_login_module(f"{PLAIN} optional; {SCRAM} required;")


def test_repr_hides_option_values():
    module = single_login_module(f'{PLAIN} required username="u" password="hunter2";')
    assert "hunter2" not in repr(module) and "password" in repr(module)


@pytest.mark.parametrize("text, problem", [
    (f'{SCRAM} required username="mirror" password="hunter2"', "missing ';'"),
    (f'{SCRAM} username="mirror" password="hunter2";', "expected a control flag"),
    (f'{SCRAM} mandatory username="mirror" password="hunter2";', "expected a control flag"),
    (f'{SCRAM} required username "mirror" password="hunter2";', "expected '=' after option username"),
    (f'{SCRAM} required username="mirror" password=;', "expected a value for option password"),
    (f'{SCRAM} required username="mirror" password="hunter2;', "unterminated quoted value"),
    (f'{SCRAM} required username="mirror" username="hunter2";', "option username is given twice"),
    (f'"{SCRAM}" required password="hunter2";', "expected a login module class name"),
    (f'{SCRAM} required password="hunter2"; /* hunter2', "unterminated /* comment"),
    (f'{SCRAM} required password="hunter2" ,;', "expected an option name or ';'"),
])
def test_syntax_errors_are_one_line_naming_the_setting_not_the_value(text, problem):
    with pytest.raises(ConfigError) as error:
        parse_jaas_config(text, "A.sasl.jaas.config")
    message = str(error.value)
    assert message.startswith("A.sasl.jaas.config: invalid JAAS configuration at character "), message
    assert problem in message and "\n" not in message
    assert "hunter2" not in message and "mirror" not in message


def test_empty_text():
    with pytest.raises(ConfigError, match=r"^sasl\.jaas\.config: is empty"):
        parse_jaas_config("  // nothing\n")


@pytest.mark.parametrize("value", ["plain", 'with "quotes"', "back\\slash", "sem;colon = x"])
def test_quote_round_trips(value):
    assert single_login_module(f"{PLAIN} required password={quote_jaas_value(value)};").options["password"] == value
