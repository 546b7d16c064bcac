"""``/jobs`` and ``/job-plugins``: bulk jobs in Connect's style (beyond Connect's API).

- ``POST /jobs`` ``{"name", "config": {"job.class", "connector"?, ...}}``: 201 + ``Location``, the
  job's info (state PENDING until a worker runs it);
- ``GET /jobs``: names; ``?expand=status`` gives ``{name: {"status": info}}`` as ``/connectors`` does;
- ``GET /jobs/{name}``: state, progress, records/s, ETA, the Spark UI, the result, ``worker_id``;
- ``DELETE /jobs/{name}``: a job that has not finished is cancelled (202, its info with
  ``cancel_requested``); a finished one is removed (200, its info with the result);
- ``GET /job-plugins``: the installed job classes.

The herder decides where a request is carried out (creation by the leader in a cluster); the
forwarding middleware sends it there.
"""

from __future__ import annotations

from urllib.parse import quote

from aiohttp import web

from mirrorline.api.errors import BadRequestError
from mirrorline.rest.common import HERDER, config_map, json_response, read_json, require_object
from mirrorline.rest.routes_connectors import check_new_name

routes = web.RouteTableDef()

_J = "/jobs/{job}"


def location(name: str) -> str:
    """The ``Location`` of a job: ``/jobs/<name>``, percent-encoded."""
    return "/jobs/" + quote(name, safe="")


@routes.get("/job-plugins")
async def list_job_plugins(request: web.Request) -> web.Response:
    """The installed job classes."""
    return json_response(await request.app[HERDER].job_plugins())


@routes.get("/jobs")
async def list_jobs(request: web.Request) -> web.Response:
    """Job names, or ``{name: {"status": info}}`` with ``?expand=status``."""
    herder = request.app[HERDER]
    names = await herder.jobs()
    if "status" not in request.query.getall("expand", []):
        return json_response(names)
    out = {}
    for name in names:
        try:
            out[name] = {"status": await herder.job_info(name)}
        except Exception:  # noqa: BLE001 - removed while listed: left out, as /connectors does
            continue
    return json_response(out)


@routes.post("/jobs")
async def create_job(request: web.Request) -> web.Response:
    """Accept a job: 201 + Location, its info."""
    body = require_object(await read_json(request), "Request body")
    try:
        name = check_new_name(body.get("name"))
    except BadRequestError as exc:
        raise BadRequestError(str(exc).replace("Connector name", "name: the job name")
                              .replace("a connector name", "a job name")) from None
    if "config" not in body:
        raise BadRequestError("config: the job's configuration is required ('config' is missing)")
    config = config_map(body["config"], "config")
    if body.get("connector") is not None:  # also accepted beside the config
        if "connector" in config and config["connector"] != body["connector"]:
            raise BadRequestError("connector: given twice, with different values")
        config["connector"] = str(body["connector"])
    info = await request.app[HERDER].create_job(name, config)
    return json_response(info, status=201, headers={"Location": location(name)})


@routes.get(_J)
async def get_job(request: web.Request) -> web.Response:
    """The job's info."""
    return json_response(await request.app[HERDER].job_info(request.match_info["job"]))


@routes.delete(_J)
async def delete_job(request: web.Request) -> web.Response:
    """Cancel (202) or remove (200, with the result) a job."""
    status, info = await request.app[HERDER].delete_job(request.match_info["job"])
    return json_response(info, status=status)
