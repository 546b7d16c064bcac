"""Config files (Java ``.properties``, YAML, JSON): the parser is contract, :mod:`mirrorline.api.configfile`.

It is a pure function of a file's text with no runtime state, and plugin code that runs outside any
worker needs it (a Faust app reads its ``mm2.properties``; CLI commands read theirs), so it lives in
the plugin API. Runtime modules may import it from either place.
"""

from mirrorline.api.configfile import load_config_file, parse_json, parse_properties, parse_yaml

__all__ = ["load_config_file", "parse_json", "parse_properties", "parse_yaml"]
