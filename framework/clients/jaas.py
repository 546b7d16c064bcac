"""A parser for JAAS configuration text, as Kafka clients take it in ``sasl.jaas.config``.

The grammar is that of Kafka's ``JaasConfig`` (a ``java.io.StreamTokenizer`` over the value)::

    <login module class> <flag> [<option>=<value> ...];   (one or more entries)

* the flag is ``required``, ``requisite``, ``sufficient`` or ``optional`` (any case);
* option names and unquoted values are words of letters, digits and ``. - _ $``;
* quoted values use double quotes; inside them ``\\"``, ``\\\\``, ``\\n``, ``\\t``... are escapes;
* ``//`` and ``/* */`` comments are skipped.

Errors are :class:`~mirrorline.api.errors.ConfigError` with one line that names the setting and
the position, never any part of the value: the value usually holds a password.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mirrorline.api.errors import ConfigError

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}


@dataclass(frozen=True)
class LoginModule:
    """One entry of a JAAS configuration: the login module's class, its control flag and its options."""

    class_name: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options hold secrets: show their names only
        return f"LoginModule({self.class_name!r}, {self.control_flag!r}, options={sorted(self.options)})"

    @property
    def simple_name(self) -> str:
        """The class name without its package (``ScramLoginModule``)."""
        return self.class_name.rsplit(".", 1)[-1]


class _Tokens:
    """Words, quoted strings and single-character symbols of a JAAS text, with their positions."""

    def __init__(self, text: str, setting: str):
        self.text = text
        self.setting = setting
        self.pos = 0

    def fail(self, what: str, at: int | None = None) -> ConfigError:
        where = self.pos if at is None else at
        return ConfigError(f"{self.setting}: invalid JAAS configuration at character {where + 1}: {what} "
                           "(expected: <LoginModule class> required key=\"value\" ...;)")

    def _skip_blanks(self) -> None:
        text = self.text
        while self.pos < len(text):
            if text[self.pos].isspace():
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated /* comment")
                self.pos = end + 2
            else:
                return

    def next(self) -> tuple[str, str, int]:
        """``(kind, text, start)``: kind is ``word``, ``quoted``, ``symbol`` or ``end``."""
        self._skip_blanks()
        start = self.pos
        if start >= len(self.text):
            return "end", "", start
        char = self.text[start]
        if char in _WORD_CHARS:
            end = start
            while end < len(self.text) and self.text[end] in _WORD_CHARS:
                end += 1
            self.pos = end
            return "word", self.text[start:end], start
        if char in "\"'":
            return "quoted", self._quoted(char), start
        self.pos += 1
        return "symbol", char, start

    def _quoted(self, quote: str) -> str:
        start = self.pos
        self.pos += 1
        out: list[str] = []
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char == quote:
                self.pos += 1
                return "".join(out)
            if char == "\\" and self.pos + 1 < len(text):
                escaped = text[self.pos + 1]
                self.pos += 2
                if escaped in "01234567":  # octal escape, up to three digits as StreamTokenizer reads them
                    digits = escaped
                    while (len(digits) < 3 and self.pos < len(text) and text[self.pos] in "01234567"
                           and int(digits + text[self.pos], 8) <= 0o377):
                        digits += text[self.pos]
                        self.pos += 1
                    out.append(chr(int(digits, 8)))
                else:
                    out.append(_ESCAPES.get(escaped, escaped))
                continue
            if char in "\r\n":
                break
            out.append(char)
            self.pos += 1
        raise self.fail("unterminated quoted value", start)


def parse_jaas_config(text: str, setting: str = "sasl.jaas.config") -> list[LoginModule]:
    """All login-module entries of a JAAS configuration text, in order.

    ``setting`` names the configuration key in error messages. Raises ConfigError on a syntax
    error, an unknown control flag, a repeated option or an empty text.
    """
    tokens = _Tokens(str(text), setting)
    modules: list[LoginModule] = []
    while True:
        kind, word, start = tokens.next()
        if kind == "end":
            break
        if kind != "word":
            raise tokens.fail("expected a login module class name", start)
        kind, flag, flag_at = tokens.next()
        if kind != "word" or flag.lower() not in CONTROL_FLAGS:
            raise tokens.fail(f"expected a control flag ({', '.join(CONTROL_FLAGS)}) after the login module class",
                              flag_at)
        options: dict[str, str] = {}
        while True:
            kind, key, key_at = tokens.next()
            if kind == "symbol" and key == ";":
                break
            if kind == "end":
                raise tokens.fail("missing ';' at the end of the login module entry", key_at)
            if kind != "word":
                raise tokens.fail("expected an option name or ';'", key_at)
            kind, symbol, at = tokens.next()
            if kind != "symbol" or symbol != "=":
                raise tokens.fail(f"expected '=' after option {key}", at)
            kind, value, at = tokens.next()
            if kind not in ("word", "quoted"):
                raise tokens.fail(f"expected a value for option {key}", at)
            if key in options:
                raise tokens.fail(f"option {key} is given twice", key_at)
            options[key] = value
        modules.append(LoginModule(word, flag.lower(), options))
    if not modules:
        raise ConfigError(f"{setting}: is empty; expected <LoginModule class> required key=\"value\" ...;")
    return modules


def single_login_module(text: str, setting: str = "sasl.jaas.config") -> LoginModule:
    """The one login module of a client's ``sasl.jaas.config`` (Kafka refuses more than one)."""
    modules = parse_jaas_config(text, setting)
    if len(modules) != 1:
        raise ConfigError(f"{setting}: must contain exactly one login module, found {len(modules)}")
    return modules[0]


def quote_jaas_value(value: str) -> str:
    """``value`` as a quoted JAAS option value (quotes and backslashes escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
