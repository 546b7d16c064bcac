"""Config providers: Connect's built-ins, reference syntax, errors, and keeping values out of stored configs."""

from __future__ import annotations

import pytest

from mirrorline.api import ConfigError
from mirrorline.api.config_provider import ConfigProvider
from mirrorline.runtime.config_providers import (
    ConfigResolver,
    has_references,
    provider_classes,
    resolve_worker_settings,
)


@pytest.fixture
def secrets_dir(tmp_path):
    (tmp_path / "kafka.properties").write_text("password = s3cret\nuser=alice\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "db-password").write_text("from-a-file")
    return tmp_path


def resolver(**params) -> ConfigResolver:
    settings = {"config.providers": "file, env, directory",
                "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
                "config.providers.env.class": "EnvVarConfigProvider",
                "config.providers.directory.class": "DirectoryConfigProvider"}
    settings.update({f"config.providers.{k.replace('__', '.')}": v for k, v in params.items()})
    return ConfigResolver.from_worker_config(settings)


def test_file_env_and_directory_references_resolve(secrets_dir, monkeypatch):
    monkeypatch.setenv("ML_TEST_TOKEN", "tok")
    raw = {"a": f"${{file:{secrets_dir}/kafka.properties:password}}",
           "b": f"user=${{file:{secrets_dir}/kafka.properties:user}} token=${{env:ML_TEST_TOKEN}}",
           "c": f"${{directory:{secrets_dir}/dir:db-password}}", "d": "${vault:x:y}", "e": 5}
    resolved = resolver().resolve(raw)
    assert resolved.values == {"a": "s3cret", "b": "user=alice token=tok", "c": "from-a-file",
                               "d": "${vault:x:y}", "e": 5}
    assert set(resolved.secrets) == {"s3cret", "alice", "tok", "from-a-file"}
    assert has_references(raw) and not has_references(resolved.values | {"d": "plain"})


def test_a_missing_key_or_file_is_a_clear_error(secrets_dir):
    with pytest.raises(ConfigError, match=r"sasl.password: \$\{file:.*:nope\}: config provider 'file' has no key 'nope'"):
        resolver().resolve({"sasl.password": f"${{file:{secrets_dir}/kafka.properties:nope}}"})
    with pytest.raises(ConfigError, match="config provider 'file': cannot read"):
        resolver().resolve({"x": f"${{file:{secrets_dir}/missing.properties:k}}"})


def test_allowed_paths_and_env_allowlist_are_enforced(secrets_dir, monkeypatch):
    monkeypatch.setenv("ML_OTHER", "x")
    limited = resolver(file__param__allowed__paths=str(secrets_dir / "dir"), env__param__allowlist__pattern="ML_OK_.*")
    with pytest.raises(ConfigError, match="not under the provider's allowed.paths"):
        limited.resolve({"x": f"${{file:{secrets_dir}/kafka.properties:password}}"})
    with pytest.raises(ConfigError, match="has no key 'ML_OTHER'"):
        limited.resolve({"x": "${env:ML_OTHER}"})


def test_bad_provider_declarations_name_the_setting():
    with pytest.raises(ConfigError, match="config.providers.file.class is required"):
        ConfigResolver.from_worker_config({"config.providers": "file"})
    with pytest.raises(ConfigError, match="config.providers.file.class: unknown config provider 'Nope'"):
        ConfigResolver.from_worker_config({"config.providers": "file", "config.providers.file.class": "Nope"})


def test_restore_puts_references_back_into_generated_task_configs(secrets_dir):
    raw = {"password": f"${{file:{secrets_dir}/kafka.properties:password}}", "topic": "t"}
    resolved = resolver().resolve(raw).values
    task = {**resolved, "task.index": "0"}
    assert ConfigResolver.restore(task, raw, resolved) == {**raw, "task.index": "0"}


def test_plugin_providers_and_worker_settings(secrets_dir):
    class Vault(ConfigProvider):
        def get(self, path, keys):
            return {k: f"{path}/{k}" for k in keys}

    known = provider_classes([Vault])
    settings = {"config.providers": "vault", "config.providers.vault.class": "Vault",
                "sasl.jaas.config": "password=${vault:kv:kafka}"}
    assert ConfigResolver.from_worker_config(settings, known).resolve(settings).values["sasl.jaas.config"] \
        == "password=kv/kafka"
    assert resolve_worker_settings(settings, [Vault])["sasl.jaas.config"] == "password=kv/kafka"
    assert resolve_worker_settings({"a": "${file:x:y}"}) == {"a": "${file:x:y}"}
