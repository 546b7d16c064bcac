"""A submitted job config, checked: the job class, the connector it names, its settings.

``POST /jobs`` takes ``{"name": ..., "config": {"job.class": ..., "connector": ..., <the job's
settings>}}``. Every problem is a 4xx whose message starts with the field it is about:
``job.class`` (missing or unknown; it may be the job's name, its class's simple name or its full
name), ``connector`` (no such connector, or one whose class the job cannot take its settings
from), or the job's own settings (parsed with its ConfigDef).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mirrorline.api.errors import BadRequestError, ConfigError, NotFoundError
from mirrorline.api.jobs import ConnectorRef, Job, JobSettings
from mirrorline.plugins import PluginRegistry, full_name

JOB_CLASS = "job.class"
CONNECTOR = "connector"
#: Keys of a submitted config that are the runtime's, not the job's.
RESERVED = (JOB_CLASS, CONNECTOR, "name")


@dataclass(frozen=True)
class PreparedJob:
    """A checked job: its class, the connector it is bound to, and the settings it runs with."""

    job_class: type[Job]
    connector: str | None
    prepared: JobSettings


def job_names(cls: type[Job]) -> list[str]:
    """The names ``job.class`` may use for a job class: its job name, simple and full class names."""
    return [cls.name, cls.__name__, full_name(cls)]


def resolve_job_class(plugins: PluginRegistry, text: str | None) -> type[Job]:
    """The job class ``job.class`` names; BadRequestError naming the field otherwise."""
    jobs = plugins.jobs()
    if not text:
        raise BadRequestError(f"{JOB_CLASS}: required; installed job classes: {', '.join(jobs) or 'none'}")
    found = [cls for cls in jobs.values() if text in job_names(cls)]
    if len(found) == 1:
        return found[0]
    if found:
        raise BadRequestError(f"{JOB_CLASS}: {text!r} is ambiguous ({', '.join(full_name(c) for c in found)}); "
                              f"use the full class name")
    raise BadRequestError(f"{JOB_CLASS}: unknown job class {text!r}; installed job classes: "
                          f"{', '.join(jobs) or 'none'}")


def job_plugins(plugins: PluginRegistry) -> list[dict[str, Any]]:
    """``GET /job-plugins``: every installed job class, as ``GET /connector-plugins`` lists connectors."""
    out = []
    for name, cls in plugins.jobs().items():
        try:
            version = cls().version()
        except Exception:  # noqa: BLE001 - a listing must not fail on one plugin
            version = None
        out.append({"class": full_name(cls), "name": name, "type": "job", "version": version,
                    "description": cls.description, "connector_classes": list(cls.connector_classes)})
    return out


def job_settings(config: Mapping[str, Any]) -> dict[str, str]:
    """The job's own settings: the submitted config without the runtime's keys, as strings."""
    return {str(k): str(v) for k, v in config.items() if k not in RESERVED and v is not None}


def check_connector(plugins: PluginRegistry, job_class: type[Job], name: str,
                    connectors: Mapping[str, Mapping[str, str]]) -> None:
    """BadRequestError naming ``connector`` unless it exists and is of a class the job can take settings from."""
    config = connectors.get(name)
    if config is None:
        raise BadRequestError(f"{CONNECTOR}: there is no connector named {name!r} in this worker cluster")
    if not job_class.connector_classes:
        raise BadRequestError(f"{CONNECTOR}: job class {job_class.name} does not take its settings from a connector")
    named = str(config.get("connector.class", ""))
    try:
        cls = plugins.connector_class(named)
    except NotFoundError:
        cls = None
    if cls is None or not any(plugins.matches(cls, wanted) for wanted in job_class.connector_classes):
        raise BadRequestError(f"{CONNECTOR}: connector {name!r} is a {named or 'connector without a class'}; job "
                              f"class {job_class.name} takes its settings from "
                              f"{' or '.join(job_class.connector_classes)} connectors only")


def prepare_job(plugins: PluginRegistry, config: Mapping[str, Any], connectors: Mapping[str, Mapping[str, str]],
                resolved_connector: Mapping[str, str] | None = None) -> PreparedJob:
    """Check a submitted job config and turn it into the settings the job runs with.

    ``connectors`` is the cluster's connector configs; ``resolved_connector`` the named
    connector's config with config-provider references resolved (defaults to the stored one).
    Raises BadRequestError (or ConfigError) naming the field at fault.
    """
    job_class = resolve_job_class(plugins, config.get(JOB_CLASS))
    connector = config.get(CONNECTOR)
    ref = None
    if connector is not None:
        if not isinstance(connector, str) or not connector:
            raise BadRequestError(f"{CONNECTOR}: must be a connector's name")
        check_connector(plugins, job_class, connector, connectors)
        ref = ConnectorRef(connector, dict(resolved_connector if resolved_connector is not None
                                           else connectors[connector]))
    try:
        prepared = job_class().prepare(job_settings(config), ref)
        job_class.config_def.parse(prepared.settings)
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{JOB_CLASS} {job_class.name}: {exc}") from None
    return PreparedJob(job_class, connector, prepared)
