"""The README's five-minute tour, run as written against a live `make run` server.

The commands are read from README.md (the fenced bash blocks of "A five-minute tour"), so the
test follows the README as it is: each curl and cairn command runs in bash from the checkout,
with only what a reader fills in substituted (the printed password, `<id>`, the server's port).
The server is `manage.py run_embedded` with the demo data, on SQLite in a temporary data
directory, exactly as `make run` starts it. Every curl answer must be a 2xx, except where the
README shows an error on purpose (a `# →` line with a `detail`), and it must match what the
README's `# →` lines show. Nothing else may answer 4xx, and the server log stays clean.
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from tests.processes import ROOT, free_port, http_ok, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

README_URL = "http://127.0.0.1:8000"
PASSWORD_PLACEHOLDER = "<the printed password>"
HTTP_STATUS = "\n@@HTTP %{http_code}"  # appended by curl's -w to each answer: its status
ERROR_LOG = re.compile(r"(Bad Request|Unauthorized|Forbidden|Not Found|Method Not Allowed|Conflict|"
                       r"Unsupported Media Type|Request Entity Too Large|Too Many Requests): (/\S*)")
FILES_THE_TOUR_WRITES = ("job.yaml", "long.yaml")


@dataclass
class Step:
    command: str
    answers: list[str] = field(default_factory=list)  # the README's `# →` lines after it


def tour_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## A five-minute tour")
    return text[start:text.index("\n## ", start + 1)]


def bash_steps(section: str) -> list[Step]:
    """The commands of the section's ```bash blocks, one Step per shell command (continuation
    lines, quotes spanning lines and here-documents included), with the `# →` lines after it."""
    steps: list[Step] = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        pending: list[str] = []
        heredoc_end = None
        for line in block.splitlines():
            if heredoc_end is not None:
                pending.append(line)
                if line.strip() == heredoc_end:
                    steps.append(Step("\n".join(pending)))
                    pending, heredoc_end = [], None
                continue
            if not pending:
                if line.startswith("# →"):
                    steps[-1].answers.append(line.removeprefix("# →").strip())
                    continue
                if not line.strip() or line.startswith("#"):
                    continue
            pending.append(line)
            if match := re.search(r"<<-?\s*'?(\w+)'?", line):
                heredoc_end = match.group(1)
                continue
            command = "\n".join(pending)
            if command.endswith("\\"):
                continue
            try:
                shlex.split(command, comments=True)
            except ValueError:  # a quote still open: the command goes on on the next line
                continue
            steps.append(Step(command))
            pending = []
        assert not pending and heredoc_end is None, f"an unfinished command in the README: {pending}"
    return steps


def readme_answer(shown: str) -> tuple[dict, set[str]]:
    """A `# →` line: its JSON (with `...` standing for the fields not shown) and the other values
    it allows for them, quoted in a remark after it (`("stopped" if ...)`)."""
    body, _, remark = shown.partition("}")
    return json.loads(re.sub(r",\s*\.\.\.\s*$", "", body) + "}"), set(re.findall(r'"([^"]+)"', remark))


@pytest.fixture
def embedded(tmp_path):
    """`make run`'s server: run_embedded with the demo data, on SQLite in its own data directory."""
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CAIRN_ADMIN_PASSWORD", "CAIRN_PUBLIC_URL")}
    env.update(CAIRN_MODE="embedded", CAIRN_DATA_DIR=str(tmp_path / "var"), DJANGO_SETTINGS_MODULE="config.settings",
               PYTHONUNBUFFERED="1")
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen([sys.executable, "manage.py", "run_embedded", "--port", str(port)], cwd=ROOT, env=env,
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: server.poll() is not None or ("Cairn is running" in log.read_text() and
                                                       http_ok(f"{url}/healthz")),
                 timeout=90, message="the server to start")
        assert server.poll() is None, log.read_text()
        yield url, log
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGINT)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(10)
        print(f"server log: {log}")


@pytest.fixture
def checkout_files(tmp_path):
    """The tour writes job.yaml and long.yaml into the checkout: keep a reader's own, remove ours."""
    kept = tmp_path / "kept"
    kept.mkdir()
    for name in FILES_THE_TOUR_WRITES:
        if (ROOT / name).exists():
            shutil.move(ROOT / name, kept / name)
    yield
    for name in FILES_THE_TOUR_WRITES:
        (ROOT / name).unlink(missing_ok=True)
        if (kept / name).exists():
            shutil.move(kept / name, ROOT / name)


def test_the_readme_tour_runs_as_written(embedded, checkout_files, tmp_path):
    url, log = embedded
    section = tour_section()

    # What `make run` prints, as the README shows it.
    output = log.read_text()
    password = re.search(r"demo ready: user 'admin', password '([^']+)', project 'demo', pool 'local'", output)
    assert password, output
    shown = re.search(r"```\n(.*?)```", section, flags=re.S).group(1)
    assert shown.splitlines()[1].replace(README_URL, url) in output

    steps = bash_steps(section)
    assert sum(s.command.startswith("curl") for s in steps) >= 8 and sum("cairn " in s.command for s in steps) >= 8

    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",  # the venv's `cairn`
               CAIRN_CONFIG=str(tmp_path / "cairn-cli.json"))
    latest_id = None
    answered, meant_errors = [], []
    for step in steps:
        command = step.command.replace(README_URL, url).replace(PASSWORD_PLACEHOLDER, password.group(1))
        if "<id>" in command:
            assert latest_id is not None, f"{step.command!r} needs an id, and nothing was submitted yet"
            command = command.replace("<id>", str(latest_id))
        curl = command.startswith("curl ")
        if curl:
            command = f"curl -w {shlex.quote(HTTP_STATUS)} " + command.removeprefix("curl ")
        variable = re.match(r"([A-Z_]+)=", command)
        if variable:  # an assignment: keep the value for the commands after it
            command += f'\nprintf %s "${variable.group(1)}"'
        run = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                             input=f"{password.group(1)}\n" if command.startswith("cairn login") else "")
        assert run.returncode == 0, f"{step.command}\n-> exit {run.returncode}\n{run.stdout}\n{run.stderr}"
        answered.append(step.command)
        if variable:
            env[variable.group(1)] = run.stdout
            assert run.stdout.strip(), f"{step.command} set {variable.group(1)} to nothing"
            continue
        if not curl:
            if command.startswith("cairn submit") and "--follow" in command:
                assert "done, final loss" in run.stdout, run.stdout  # streamed the logs to the end
                assert "succeeded" in run.stderr + run.stdout
            if command.startswith("cairn ls"):
                assert "hello-cli" in run.stdout and "succeeded" in run.stdout
            continue

        body, _, status = run.stdout.rpartition("\n@@HTTP ")
        status = int(status)
        expected_error = any('"detail"' in shown for shown in step.answers)
        if expected_error:
            assert 400 <= status < 500, f"{step.command}\n-> {status} {body}"
            path = re.search(re.escape(url) + r"(/[^\s'\"]*)", command.replace("$API", env["API"])).group(1)
            meant_errors.append((status, path))
        else:
            assert 200 <= status < 300, f"{step.command}\n-> {status} {body}"
        if "/logs/" in command:
            assert "follow=1" not in command or "done, final loss" in body, body  # followed to the end
            continue
        answer = json.loads(body)
        if "training-jobs/ " in command + " " and "-X POST" in command:  # a submit: later <id>s are this one
            latest_id = answer["id"]
        for shown in step.answers:
            fields, alternatives = readme_answer(shown)
            for key, value in fields.items():
                if key == "id":
                    continue  # the README's ids are examples
                if isinstance(value, str):  # an address the README shows on port 8000
                    value = value.replace(README_URL, url)
                assert answer[key] == value or answer[key] in alternatives, f"{step.command}\n-> {answer}"

    assert answered == [s.command for s in steps]

    # The browser section's addresses open (the dashboard, the API docs, the admin's login).
    for address in re.findall(r"^- (http://127\.0\.0\.1:8000\S*?):", section, flags=re.M):
        page = requests.get(address.replace(README_URL, url), timeout=30)
        assert page.status_code == 200, (address, page.status_code)
    assert requests.get(f"{url}/favicon.ico", timeout=30).status_code == 200

    # No 4xx but the README's own, and none of the start-up noise.
    output = log.read_text()
    assert [status for status, _ in meant_errors] == [409]  # the stop of the finished job, as shown
    assert ERROR_LOG.findall(output) == [("Conflict", path) for _, path in meant_errors], output
    for noise in ("Traceback", "No directory at", "StreamingHttpResponse must consume", "Not Found: /favicon.ico"):
        assert noise not in output, output
