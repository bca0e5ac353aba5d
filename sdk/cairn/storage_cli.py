"""`cairn volume ...`, `cairn dataset ...` and `cairn model ...`: a project's storage from the shell.

Registered by cli.build_parser (add_storage_commands); each command is one or two API calls.
"""
from __future__ import annotations

import argparse
import os
from typing import Any
from urllib.parse import quote

from rich import box
from rich.table import Table

from cairn.cli import EXIT_OK, App, CliError, add_row, format_time


def format_bytes(value: Any) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)


def _path(app: App, collection: str, *parts: str) -> str:
    project = quote(app.project(), safe="")
    tail = "".join(f"{quote(str(p), safe='')}/" for p in parts)
    return f"/projects/{project}/{collection}/{tail}"


def _table(*columns: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    for column in columns:
        table.add_column(column, no_wrap=True)
    return table


# -- volumes -------------------------------------------------------------------------------------------

def cmd_volume_create(app: App) -> int:
    body = {"name": app.args.name, "size_gb": app.args.size, "description": app.args.description or ""}
    volume = app.client()._json("POST", _path(app, "volumes"), json=body)
    if app.args.json:
        app.print_json(volume)
    else:
        app.say(f"Created volume {volume['name']} ({volume['size_gb']} GiB); workloads mount it with "
                f"volumes: [{{name: {volume['name']}}}] at {volume['default_mount']}.")
    return EXIT_OK


def cmd_volume_ls(app: App) -> int:
    client = app.client()
    volumes = client.get(_path(app, "volumes"))
    usage = client.get(_path(app, "volumes", "usage"))
    if app.args.json:
        app.print_json({"volumes": volumes, "usage": usage})
        return EXIT_OK
    table = _table("NAME", "SIZE", "USED", "MOUNT", "CREATED")
    for v in volumes:
        add_row(table, v["name"], f"{v['size_gb']} GiB", format_bytes(v.get("used_bytes")), v["default_mount"],
                format_time(v.get("created_at")))
    app.out.print(table)
    app.say(f"{usage['declared_gb']} of {usage['quota_gb']} GiB declared; {format_bytes(usage['used_bytes'])} used.")
    return EXIT_OK


def cmd_volume_rm(app: App) -> int:
    app.client()._json("DELETE", _path(app, "volumes", app.args.name))
    app.say(f"Deleted volume {app.args.name} and its files.")
    return EXIT_OK


# -- models ----------------------------------------------------------------------------------------------

def cmd_model_ls(app: App) -> int:
    models = app.client().paginate(_path(app, "models"))
    if app.args.json:
        app.print_json(list(models))
        return EXIT_OK
    table = _table("NAME", "LATEST", "VERSIONS", "CREATED")
    for m in models:
        add_row(table, m["name"], f"@{m['latest']}" if m.get("latest") else "-", str(m.get("versions", 0)),
                format_time(m.get("created_at")))
    app.out.print(table)
    return EXIT_OK


def cmd_model_show(app: App) -> int:
    name, _, version = app.args.model.partition("@")
    client = app.client()
    if version:
        data = client.get(_path(app, "models", name, "versions", version))
        versions = [data]
    else:
        data = client.get(_path(app, "models", name))
        versions = data.get("versions") or []
    if app.args.json:
        app.print_json(data)
        return EXIT_OK
    table = _table("REF", "RUN", "SIZE", "FILES", "METRICS", "PARAMS", "CREATED")
    for v in versions:
        metrics = ", ".join(f"{k}={m.get('last'):g}" for k, m in sorted((v.get("metrics") or {}).items())
                            if isinstance(m, dict) and isinstance(m.get("last"), int | float))
        params = ", ".join(f"{k}={p}" for k, p in sorted((v.get("params") or {}).items()))
        add_row(table, v["ref"], str(v["run"]) if v.get("run") else "-", format_bytes(v.get("total_bytes")),
                str(len(v.get("files") or [])), metrics or "-", params or "-", format_time(v.get("created_at")))
    app.out.print(table)
    app.say("Serve one with a deployment's `model: <name>@<version>` (mounted read-only at /model).")
    return EXIT_OK


# -- datasets -------------------------------------------------------------------------------------------

def _source_body(args: argparse.Namespace) -> dict:
    if args.s3:
        if not args.s3.startswith("s3://"):
            raise CliError("--s3 takes s3://BUCKET/PREFIX")
        bucket, _, prefix = args.s3[5:].partition("/")
        body: dict = {"source": "s3", "location": {"bucket": bucket, "prefix": prefix,
                                                    "endpoint_url": args.endpoint or "", "region": args.region or ""}}
        key_id, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
        if key_id or secret:
            body["credentials"] = {"access_key_id": key_id or "", "secret_access_key": secret or ""}
        return body
    if args.nfs:
        server, _, path = args.nfs.partition(":")
        return {"source": "nfs", "location": {"server": server, "path": path}}
    if args.host_path:
        if not args.pool:
            raise CliError("--host-path needs --pool (the pool whose allowed paths hold it)")
        return {"source": "host_path", "location": {"path": args.host_path}, "pool": args.pool}
    raise CliError("give the source: --s3 s3://BUCKET/PREFIX, --nfs SERVER:/EXPORT or --host-path DIR --pool POOL")


def cmd_dataset_register(app: App) -> int:
    body = {"name": app.args.name, "description": app.args.description or "", **_source_body(app.args)}
    dataset = app.client()._json("POST", _path(app, "datasets"), json=body)
    if app.args.json:
        app.print_json(dataset)
        return EXIT_OK
    v = dataset["versions"][0]
    app.say(f"Registered dataset {dataset['name']} ({dataset['source']}): version 1, {v['files']} files, "
            f"{format_bytes(v['total_bytes'])}. Mount it with datasets: [{{name: {dataset['name']}}}].")
    return EXIT_OK


def cmd_dataset_ls(app: App) -> int:
    datasets = app.client().paginate(_path(app, "datasets"))
    if app.args.json:
        app.print_json(list(datasets))
        return EXIT_OK
    table = _table("NAME", "SOURCE", "LATEST", "FILES", "SIZE", "CACHED ON")
    for d in datasets:
        v = (d.get("versions") or [{}])[0]
        add_row(table, d["name"], d["source"], f"@{v.get('version', '-')}", str(v.get("files", "-")),
                format_bytes(v.get("total_bytes")), ", ".join(v.get("cached_on") or []) or "-")
    app.out.print(table)
    return EXIT_OK


def cmd_dataset_show(app: App) -> int:
    data = app.client().get(_path(app, "datasets", app.args.name))
    if app.args.json:
        app.print_json(data)
        return EXIT_OK
    app.say(f"{data['name']}: {data['source']} {data['location']}")
    table = _table("VERSION", "FILES", "SIZE", "DIGEST", "CACHED ON", "CREATED")
    for v in data.get("versions") or []:
        add_row(table, f"@{v['version']}", str(v["files"]), format_bytes(v["total_bytes"]), v["digest"][:12],
                ", ".join(v.get("cached_on") or []) or "-", format_time(v.get("created_at")))
    app.out.print(table)
    return EXIT_OK


def cmd_dataset_snapshot(app: App) -> int:
    result = app.client()._json("POST", _path(app, "datasets", app.args.name, "snapshot"))
    v = result["version"]
    if result["created"]:
        app.say(f"New version {app.args.name}@{v['version']}: {v['files']} files, {format_bytes(v['total_bytes'])}.")
    else:
        app.say(f"Unchanged since {app.args.name}@{v['version']}; no new version.")
    return EXIT_OK


def add_storage_commands(sub: argparse._SubParsersAction, project_option) -> None:
    volume = sub.add_parser("volume", help="project volumes: shared folders workloads mount",
                            description="Create, list and delete the project's volumes.")
    vsub = volume.add_subparsers(dest="volume_command", metavar="ACTION")
    vsub.required = True
    p = vsub.add_parser("create", help="create a volume")
    p.add_argument("name")
    p.add_argument("--size", type=int, required=True, metavar="GIB", help="size in GiB (counts against the quota)")
    p.add_argument("--description")
    p.add_argument("--json", action="store_true", help="print JSON")
    project_option(p)
    p.set_defaults(func=cmd_volume_create)
    p = vsub.add_parser("ls", help="list volumes with their usage")
    p.add_argument("--json", action="store_true", help="print JSON")
    project_option(p)
    p.set_defaults(func=cmd_volume_ls)
    p = vsub.add_parser("rm", help="delete a volume and its files")
    p.add_argument("name")
    project_option(p)
    p.set_defaults(func=cmd_volume_rm)

    dataset = sub.add_parser("dataset", help="datasets: versioned sources workloads mount read-only",
                             description="Register datasets (an S3 prefix, an NFS export, a host path a pool allows), "
                                         "list them with their versions and where they are cached, snapshot them.")
    dsub = dataset.add_subparsers(dest="dataset_command", metavar="ACTION")
    dsub.required = True
    p = dsub.add_parser("register", help="register a dataset; its version 1 is the source's manifest now",
                        description="S3 credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (stored "
                                    "encrypted by Cairn, never shown again).")
    p.add_argument("name")
    p.add_argument("--s3", metavar="s3://BUCKET/PREFIX")
    p.add_argument("--endpoint", metavar="URL", help="an S3-compatible endpoint (default: AWS)")
    p.add_argument("--region")
    p.add_argument("--nfs", metavar="SERVER:/EXPORT")
    p.add_argument("--host-path", metavar="DIR")
    p.add_argument("--pool", help="with --host-path: the pool that allows it")
    p.add_argument("--description")
    p.add_argument("--json", action="store_true", help="print JSON")
    project_option(p)
    p.set_defaults(func=cmd_dataset_register)
    for name, help_text, func in (("ls", "list datasets", cmd_dataset_ls),
                                  ("show", "show a dataset's versions and where they are cached", cmd_dataset_show),
                                  ("snapshot", "take the source's manifest now as a new version", cmd_dataset_snapshot)):
        p = dsub.add_parser(name, help=help_text)
        if name != "ls":
            p.add_argument("name")
        if name != "snapshot":
            p.add_argument("--json", action="store_true", help="print JSON")
        project_option(p)
        p.set_defaults(func=func)

    model = sub.add_parser("model", help="registered models: versions and lineage",
                           description="List the project's models and show their versions with the run, params "
                                       "and metrics that produced them (register with cairn.register_model()).")
    msub = model.add_subparsers(dest="model_command", metavar="ACTION")
    msub.required = True
    p = msub.add_parser("ls", help="list models")
    p.add_argument("--json", action="store_true", help="print JSON")
    project_option(p)
    p.set_defaults(func=cmd_model_ls)
    p = msub.add_parser("show", help="show a model's versions (NAME) or one version (NAME@VERSION)")
    p.add_argument("model", metavar="NAME[@VERSION]")
    p.add_argument("--json", action="store_true", help="print JSON")
    project_option(p)
    p.set_defaults(func=cmd_model_show)
