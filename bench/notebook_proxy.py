"""Cairn's notebook proxy against direct access to the same JupyterLab, in one run.

    scripts/with-test-services.sh .venv/bin/python bench/notebook_proxy.py

with-test-services.sh gives a private PostgreSQL (DATABASE_URL); this script creates the database
`cairn_nb_bench` in it, migrates Cairn, starts one JupyterLab (Cairn's own launcher, base_url
/nb/bench/<id>/, a token) and Cairn itself (uvicorn config.asgi:application, one worker), records
the notebook as running at that JupyterLab, and measures each figure against both addresses:

  a. HTTP latency of a small API call (GET api/status), p50 and p99 over --requests calls,
     direct and proxied interleaved;
  b. download throughput of a 50 MB file (GET files/big.bin), median of --downloads, direct and
     proxied alternating: with curl (a compiled client, so the client's own CPU does not decide
     the figure on 2 shared CPUs) and with httpx (what a Python client sees);
  c. websocket round trip of a kernel `execute_request` (send -> execute_reply), p50 and p99
     over --executes, one socket each.

The proxied client signs in with a Cairn API token (the proxy checks it, the project, the
notebook, then adds Jupyter's token); the direct one sends Jupyter's token. Figures are printed
and written into the "## Notebook proxy" section of docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SECTION = "## Notebook proxy"
INTRO = ("Cairn's notebook proxy (/nb/<project>/<id>/, apps/notebooks/proxy.py) against direct access to the same "
         "JupyterLab, in one run, on one machine (bench/notebook_proxy.py). Targets: at most 2 ms added at p50 and "
         "10 ms at p99, at least 80% of direct download throughput.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values, q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def database_url() -> str:
    base = os.environ.get("DATABASE_URL")
    if not base or not base.startswith("postgres"):
        sys.exit("DATABASE_URL must point at PostgreSQL: run under scripts/with-test-services.sh")
    import psycopg

    parts = urllib.parse.urlsplit(base)
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS cairn_nb_bench WITH (FORCE)")
        conn.execute("CREATE DATABASE cairn_nb_bench")
    return parts._replace(path="/cairn_nb_bench").geturl()


def wait_for(url: str, headers: dict, timeout: float = 120) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, headers=headers, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    sys.exit(f"{url} did not answer")


def setup(data_dir: Path):
    """Django on the bench database: a user, a project, a running notebook row, an API token."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    from apps.accounts.services import api_token_create
    from apps.clusters.services import local_cluster_register
    from apps.projects.models import Membership, Project
    from apps.workloads.models import Workload

    node = local_cluster_register()
    user = get_user_model().objects.create_user(username="bench", password="bench-password-1")
    project = Project.objects.create(slug="bench", name="Bench")
    Membership.objects.create(project=project, user=user, role="owner")
    workload = Workload.objects.create(project=project, pool=node.pool, kind="notebook", name="nb", spec={"env": {}},
                                       created_by=user, status="running", attempt=1, replicas=1, cpu_milli=1000,
                                       memory_mb=1024)
    _, token = api_token_create(user=user, name="bench", scopes=["read", "write"])
    return workload, token


def measure_http(direct, proxied, n: int) -> dict:
    out = {"direct": [], "proxy": []}
    for _ in range(20):  # warm both paths (connections, caches)
        direct["client"].get(direct["root"] + "api/status")
        proxied["client"].get(proxied["root"] + "api/status")
    for _ in range(n):
        for name, side in (("direct", direct), ("proxy", proxied)):
            start = time.perf_counter()
            answer = side["client"].get(side["root"] + "api/status")
            out[name].append((time.perf_counter() - start) * 1000)
            assert answer.status_code == 200, answer.text
    return out


def measure_download(direct, proxied, n: int, size: int) -> dict:
    """MB/s of a 50 MB download each way, alternating: with curl (compiled: the client costs little
    next to the servers) when it is installed, and with the Python client (httpx, 64 KiB reads)."""
    out = {"direct": [], "proxy": [], "direct-httpx": [], "proxy-httpx": []}
    curl = shutil.which("curl")
    for _ in range(n):
        for name, side in (("direct", direct), ("proxy", proxied)):
            if curl:
                argv = [curl, "-sS", "-o", "/dev/null", "-w", "%{size_download} %{time_total}"]
                for header, value in side["ws_headers"].items():
                    argv += ["-H", f"{header}: {value}"]
                got, seconds = subprocess.run([*argv, side["root"] + "files/big.bin"], capture_output=True, text=True,
                                              check=True).stdout.split()
                assert int(got) == size, got
                out[name].append(size / 1e6 / float(seconds))
            start = time.perf_counter()
            got = 0
            with side["client"].stream("GET", side["root"] + "files/big.bin") as answer:
                assert answer.status_code == 200
                for chunk in answer.iter_raw():
                    got += len(chunk)
            assert got == size, got
            out[f"{name}-httpx"].append(size / 1e6 / (time.perf_counter() - start))
    if not curl:
        out["direct"], out["proxy"] = out["direct-httpx"], out["proxy-httpx"]
    out["client"] = "curl" if curl else "httpx"
    return out


def measure_kernel(direct, proxied, n: int) -> dict:
    from websockets.sync.client import connect

    kernel = direct["client"].post(direct["root"] + "api/kernels", json={}).json()["id"]
    out = {}
    for name, side in (("direct", direct), ("proxy", proxied)):
        url = side["root"].replace("http://", "ws://") + f"api/kernels/{kernel}/channels"
        times = []
        with connect(url, additional_headers=side["ws_headers"], max_size=None) as ws:
            for i in range(n + 10):
                msg_id = uuid.uuid4().hex
                message = {"header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "b",
                                      "session": "s", "version": "5.3"},
                           "parent_header": {}, "metadata": {}, "channel": "shell",
                           "content": {"code": "1", "silent": True, "store_history": False, "user_expressions": {},
                                       "allow_stdin": False}}
                start = time.perf_counter()
                ws.send(json.dumps(message))
                while True:
                    reply = json.loads(ws.recv(timeout=30))
                    if reply.get("parent_header", {}).get("msg_id") == msg_id and reply["msg_type"] == "execute_reply":
                        break
                if i >= 10:  # the first ten warm up
                    times.append((time.perf_counter() - start) * 1000)
        out[name] = times
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--downloads", type=int, default=25)
    parser.add_argument("--executes", type=int, default=300)
    parser.add_argument("--no-record", action="store_true", help="print only; do not edit docs/benchmarks.md")
    args = parser.parse_args()

    os.environ["DATABASE_URL"] = database_url()
    tmp = Path(tempfile.mkdtemp(prefix="nb-bench-"))
    os.environ["CAIRN_DATA_DIR"] = str(tmp / "data")
    workload, api_token = setup(tmp / "data")
    import httpx
    import psutil

    from apps.notebooks.commands import jupyterlab_command
    from apps.workloads.models import Workload

    root_dir = tmp / "root"
    root_dir.mkdir()
    size = 50 * 1024 * 1024
    (root_dir / "big.bin").write_bytes(os.urandom(size))
    jupyter_port, cairn_port = free_port(), free_port()
    token = uuid.uuid4().hex
    lab = subprocess.Popen(
        jupyterlab_command(workload, port=jupyter_port, cwd=root_dir, as_root=os.geteuid() == 0),
        env={**os.environ, "JUPYTER_TOKEN": token, "HOME": str(tmp)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    Workload.objects.filter(pk=workload.pk).update(runtime={
        "backend": "local", "attempt": 1, "alive": True, "url": f"http://127.0.0.1:{jupyter_port}/", "token": token,
        "replicas": []})
    cairn = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", str(cairn_port),
         "--log-level", "warning", "--no-access-log"], cwd=ROOT, env=dict(os.environ),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prefix = f"/nb/bench/{workload.pk}/"
    try:
        direct_headers = {"Authorization": f"token {token}"}
        proxy_headers = {"Authorization": f"Bearer {api_token}"}
        wait_for(f"http://127.0.0.1:{jupyter_port}{prefix}api/status", direct_headers)
        wait_for(f"http://127.0.0.1:{cairn_port}{prefix}api/status", proxy_headers)
        limits = httpx.Timeout(60)
        with httpx.Client(headers=direct_headers, timeout=limits) as dc, \
                httpx.Client(headers=proxy_headers, timeout=limits) as pc:
            direct = {"client": dc, "root": f"http://127.0.0.1:{jupyter_port}{prefix}", "ws_headers": direct_headers}
            proxied = {"client": pc, "root": f"http://127.0.0.1:{cairn_port}{prefix}", "ws_headers": proxy_headers}
            server, jupyter = psutil.Process(cairn.pid), psutil.Process(lab.pid)

            def cpu(process=server) -> float:
                times = process.cpu_times()
                return times.user + times.system

            before = cpu()
            http = measure_http(direct, proxied, args.requests)
            cpu_http = (cpu() - before) / (args.requests + 20) * 1000  # ms of Cairn's CPU per proxied call
            before, lab_before = cpu(), cpu(jupyter)
            download = measure_download(direct, proxied, args.downloads, size)
            relayed = args.downloads * size / 1e6 * (2 if download["client"] == "curl" else 1)
            cpu_download = (cpu() - before) / relayed * 1000  # ms per MB
            lab_download = (cpu(jupyter) - lab_before) / (2 * relayed) * 1000  # it serves both ways
            kernel = measure_kernel(direct, proxied, args.executes)
    finally:
        for process in (cairn, lab):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()

    def row(label, unit, d, p, added=True):
        extra = f"{p - d:+.2f} {unit}" if added else f"{100 * p / d:.0f}% of direct"
        return f"| {label} | {d:.2f} {unit} | {p:.2f} {unit} | {extra} |"

    dl_d, dl_p = statistics.median(download["direct"]), statistics.median(download["proxy"])
    dl_dh, dl_ph = statistics.median(download["direct-httpx"]), statistics.median(download["proxy-httpx"])
    lines = [
        "| measure | direct | through Cairn's proxy | proxy adds |",
        "|---|---|---|---|",
        row("HTTP GET api/status, p50", "ms", pct(http["direct"], 50), pct(http["proxy"], 50)),
        row("HTTP GET api/status, p99", "ms", pct(http["direct"], 99), pct(http["proxy"], 99)),
        row(f"download 50 MB with {download['client']}, median", "MB/s", dl_d, dl_p, added=False),
        *([row("download 50 MB with httpx (Python), median", "MB/s", dl_dh, dl_ph, added=False)]
          if download["client"] != "httpx" else []),
        row("kernel execute_request round trip, p50", "ms", pct(kernel["direct"], 50), pct(kernel["proxy"], 50)),
        row("kernel execute_request round trip, p99", "ms", pct(kernel["direct"], 99), pct(kernel["proxy"], 99)),
    ]
    load = os.getloadavg()
    command = "scripts/with-test-services.sh .venv/bin/python bench/notebook_proxy.py"
    if (args.requests, args.downloads, args.executes) != (1000, 25, 300):
        command += f" --requests {args.requests} --downloads {args.downloads} --executes {args.executes}"
    body = "\n".join([
        f"Command: `{command}` ({args.requests} calls each way, interleaved; {args.downloads} downloads each way and client; "
        f"{args.executes} executes each way). Machine: {platform.machine()}, {os.cpu_count()} CPUs shared with "
        f"other work (load average {load[0]:.1f} at the end of the run), Python " + platform.python_version()
        + "; uvicorn with one worker; both clients on the same machine as the servers.",
        "",
        *lines,
        "",
        f"Cairn's own CPU time (the uvicorn process, user + system), which the machine's load does not inflate: "
        f"{cpu_http:.2f} ms per proxied API call (access check included), {cpu_download:.2f} ms per MB "
        f"downloaded. JupyterLab's, for comparison: {lab_download:.2f} ms per MB it serves. A download through "
        "the proxy needs both, plus the client's, from the same 2 CPUs; a direct one needs no proxy.",
    ])
    print(body)
    if not args.no_record:
        sys.path.insert(0, str(ROOT / "bench"))
        from benchmarks_doc import write_block

        write_block(section=SECTION, intro=INTRO, prefix="bench", key="notebook-proxy", block_body=body)
        print("written to docs/benchmarks.md")


if __name__ == "__main__":
    main()
