"""docs/configuration.md is the settings' declarations, rendered: it changes when they do."""

from pathlib import Path

from mirrorline.runtime.config_docs import render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_configuration_page_matches_the_declarations():
    assert PAGE.read_text() == render(), (
        "docs/configuration.md differs from the ConfigDef declarations: regenerate it with "
        "`.venv/bin/python -m mirrorline.runtime.config_docs > docs/configuration.md`")


def test_the_page_lists_the_topic_creation_settings():
    text = PAGE.read_text()
    for name in ("topic.creation.enable", "topic.creation.groups", "topic.creation.default.partitions",
                 "topic.creation.default.replication.factor", "topic.creation.<group>.include"):
        assert f"| `{name}` |" in text, name
