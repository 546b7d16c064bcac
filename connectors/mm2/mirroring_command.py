"""``mirrorline mirroring``: the mirroring topic-selection controls from the command line.

::

    mirrorline mirroring topic-selection get   ADDRESS
    mirrorline mirroring topic-selection set   ADDRESS --includes REGEX [REGEX ...] | --none
    mirrorline mirroring topic-selection reset ADDRESS
    mirrorline mirroring active-topics         ADDRESS

``ADDRESS`` is either ``--url http://worker:8083 [--connector NAME]``, which calls a worker's
``/admin/mirroring/*`` REST routes (``--user`` with the password in ``MIRRORLINE_REST_PASSWORD``
for Basic authentication, ``--cacert`` for an https worker whose certificate the system does
not trust), or ``MM2_PROPERTIES --flow A->B``, which reads and writes the selection store on the
flow's target cluster directly, for MM2's dedicated mode (``mirrorline mm2`` serves no REST
API); there, active topics come from the flow's config topic. Each prints the JSON answer of
the REST API. Errors are one line and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
from typing import Any

import aiohttp

from mirrorline.api import Command, ConfigError, ConnectError, KafkaClients, WorkerLauncher
from mirrorline.api.configfile import load_config_file

from mirrorline.connectors.mirror_client.config import client_props
from mirrorline.connectors.mm2.mm2_config import SOURCE_CONNECTOR, MirrorMakerConfig
from mirrorline.connectors.source_mirror.config_topic import read_task_configs
from mirrorline.connectors.source_mirror.rest_admin import ACTIVE_TOPICS_PATH, CONNECTOR_PARAM, TOPIC_SELECTION_PATH
from mirrorline.connectors.source_mirror.selection_admin import (
    MirrorTarget,
    active_topics_body,
    parse_selection_request,
    read_selection,
    selection_body,
    write_selection,
)
from mirrorline.connectors.source_mirror.topics import assigned_topics

#: Environment variable holding the Basic-auth password for ``--user``.
PASSWORD_ENV = "MIRRORLINE_REST_PASSWORD"
#: Seconds a worker gets to answer a REST call.
REST_TIMEOUT_S = 60.0


def _add_address(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("mm2_properties", nargs="?", metavar="MM2_PROPERTIES",
                        help="an mm2.properties file: work on the store of --flow directly (MM2 dedicated mode)")
    parser.add_argument("--flow", help="with MM2_PROPERTIES: the flow SOURCE->TARGET, e.g. A->B")
    parser.add_argument("--url", help="a worker's REST URL, e.g. http://localhost:8083 (Connect-style workers)")
    parser.add_argument("--connector", help="with --url: the MirrorSource connector to address (default: all)")
    parser.add_argument("--user", help=f"with --url: Basic-auth user (password from ${PASSWORD_ENV})")
    parser.add_argument("--cacert", help="with --url: CA certificate file (PEM) to trust for an https worker")


def parse_flow(config: MirrorMakerConfig, text: str | None) -> tuple[str, str]:
    """``--flow "A->B"`` as (source, target), both listed in ``clusters``; ConfigError otherwise."""
    source, sep, target = (text or "").partition("->")
    source, target = source.strip(), target.strip()
    if not sep or not source or not target or source == target:
        raise ConfigError(f"--flow {text!r}: give the flow as SOURCE->TARGET with two different cluster aliases, "
                          f"e.g. --flow A->B")
    unknown = [alias for alias in (source, target) if alias not in config.clusters]
    if unknown:
        raise ConfigError(f"--flow {text}: unknown cluster alias(es) {', '.join(unknown)}; 'clusters' lists "
                          f"{', '.join(config.clusters)}")
    return source, target


class MirroringCommand(Command):
    """``mirrorline mirroring``: get or set the topic selection, list active topics."""

    name = "mirroring"
    help = "mirroring controls: topic selection (get/set/reset) and active topics, over REST or on an mm2 flow"

    def configure_parser(self, parser: argparse.ArgumentParser) -> None:
        """``topic-selection get|set|reset`` and ``active-topics``, each with the address options."""
        parser.description = "Mirroring controls (IBM Event Streams-style): the topic selection and the active topics."
        sub = parser.add_subparsers(dest="mirroring_command", metavar="COMMAND", required=True)
        selection = sub.add_parser("topic-selection", help="the include patterns of the mirrored topics")
        actions = selection.add_subparsers(dest="selection_action", metavar="ACTION", required=True)
        _add_address(actions.add_parser("get", help="print the topic selection in effect"))
        set_parser = actions.add_parser(
            "set", help="replace the topic selection (takes effect within refresh.topics.interval.seconds)")
        _add_address(set_parser)
        choice = set_parser.add_mutually_exclusive_group(required=True)
        choice.add_argument("--includes", nargs="+", metavar="REGEX",
                            help="the regular expressions of the source topics to mirror (full match); "
                                 "give them last")
        choice.add_argument("--none", action="store_true", help="mirror no topic")
        _add_address(actions.add_parser("reset", help="forget the topic selection: the configured topics apply"))
        _add_address(sub.add_parser("active-topics", help="print the source topics being mirrored"))

    async def run(self, args: argparse.Namespace, launcher: WorkerLauncher) -> int:
        """Validate, carry the action out over REST or on the flow's store, print the JSON answer."""
        action = args.selection_action if args.mirroring_command == "topic-selection" else "active"
        includes = None
        if action == "set":
            includes = parse_selection_request({"includes": [""] if args.none else list(args.includes)})
        if args.url is not None:
            if args.mm2_properties is not None or args.flow is not None:
                raise ConfigError("give either --url or MM2_PROPERTIES --flow SOURCE->TARGET, not both")
            body = await _over_rest(args, action, includes)
        else:
            body = await _on_flow(args, action, includes, launcher.clients)
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return 0


async def _over_rest(args: argparse.Namespace, action: str, includes: list[str] | None) -> Any:
    """Carry ``action`` out with a worker's REST API."""
    method, path, body = {"get": ("GET", TOPIC_SELECTION_PATH, None),
                          "set": ("POST", TOPIC_SELECTION_PATH, {"includes": includes}),
                          "reset": ("DELETE", TOPIC_SELECTION_PATH, None),
                          "active": ("GET", ACTIVE_TOPICS_PATH, None)}[action]
    url = args.url.rstrip("/") + path
    params = {CONNECTOR_PARAM: args.connector} if args.connector else None
    auth = None
    if args.user:
        password = os.environ.get(PASSWORD_ENV)
        if password is None:
            raise ConfigError(f"--user {args.user}: set the password in the environment variable {PASSWORD_ENV}")
        auth = aiohttp.BasicAuth(args.user, password)
    kwargs: dict[str, Any] = {"params": params, "auth": auth}
    if body is not None:
        kwargs["json"] = body
    if args.cacert:
        try:
            kwargs["ssl"] = ssl.create_default_context(cafile=args.cacert)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--cacert {args.cacert}: cannot read it ({exc})") from None
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REST_TIMEOUT_S)) as session:
            async with session.request(method, url, **kwargs) as response:
                text = await response.text()
                status, reason = response.status, response.reason
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ConnectError(f"cannot reach the worker at {args.url}: {str(exc) or type(exc).__name__}") from None
    try:
        data = json.loads(text) if text.strip() else None
    except ValueError:
        data = None
    if status >= 400:
        message = data.get("message") if isinstance(data, dict) else (text.strip()[:200] or reason)
        raise ConnectError(f"{method} {path} answered {status}: {message}")
    return data


async def _on_flow(args: argparse.Namespace, action: str, includes: list[str] | None, clients: KafkaClients) -> Any:
    """Carry ``action`` out on the selection store of an mm2.properties flow, with no worker involved."""
    if args.mm2_properties is None:
        raise ConfigError("say where: --url http://worker:8083, or MM2_PROPERTIES --flow SOURCE->TARGET")
    if args.connector is not None or args.user is not None or args.cacert is not None:
        raise ConfigError("--connector, --user and --cacert go with --url; MM2_PROPERTIES --flow addresses the "
                          "flow's MirrorSource connector")
    config = MirrorMakerConfig(load_config_file(args.mm2_properties))
    source, target = parse_flow(config, args.flow)
    connector_config = config.connector_config(source, target, SOURCE_CONNECTOR)
    referenced = sorted(k for role in ("admin", "consumer", "producer")
                        for k, v in client_props(connector_config, "target", role).items() if "${" in v)
    if referenced:
        raise ConfigError(f"the settings of cluster {target} use config-provider references ({', '.join(referenced)}), "
                          f"which this command does not resolve yet: give it a copy of the file with the values")
    mirror = MirrorTarget(connector_config.get("name", SOURCE_CONNECTOR), connector_config, clients)
    with clients.quiet_logs():
        if action == "get":
            return selection_body({mirror.name: await read_selection(mirror)})
        if action in ("set", "reset"):
            return selection_body({mirror.name: await write_selection(mirror, includes)})
        topic = config.worker_config(source, target)["config.storage.topic"]
        try:
            task_configs = await read_task_configs(clients, connector_config, topic, mirror.name)
        except ConnectError:
            raise
        except Exception as exc:  # noqa: BLE001 - Kafka client errors, as one line
            raise ConnectError(f"cannot read the config topic {topic} of flow {source}->{target} on cluster "
                               f"{target}: {str(exc) or type(exc).__name__}") from None
        return active_topics_body({mirror.name: assigned_topics(task_configs)})
