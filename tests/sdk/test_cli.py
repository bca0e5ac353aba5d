"""The `cairn` command, called in-process through cairn.cli.main() against the fake API."""
import json
import stat
import threading
from datetime import UTC, datetime, timedelta

import pytest

from cairn import cli
from tests.sdk.fakeserver import TOKEN


def config_of(path):
    return json.loads(path.read_text())


def assert_clean_error(result, message, code=1):
    assert result.code == code
    assert message in result.err
    assert result.err.startswith("error")
    assert "Traceback" not in result.err + result.out


# -- login / logout --------------------------------------------------------------------------------


def test_login_with_password_on_stdin_saves_a_private_token(run, server, cairn_env):
    result = run("login", "--url", server.url, "--username", "alice", "--password-stdin",
                 stdin="wonderland\n")
    assert result.code == 0, result.err
    assert "Logged in to " + server.url + " as alice" in result.out
    assert config_of(cairn_env) == {"url": server.url, "token": TOKEN, "username": "alice"}
    assert stat.S_IMODE(cairn_env.stat().st_mode) == 0o600
    body = server.find("POST", "/auth/login/")[0].body
    assert body["username"] == "alice" and body["password"] == "wonderland"
    assert body["token_name"].startswith("cli@")


def test_login_prompts_for_the_password(run, server, cairn_env, monkeypatch):
    prompts = []
    monkeypatch.setattr(cli.getpass, "getpass", lambda prompt: prompts.append(prompt) or
                        "wonderland")
    result = run("login", "--url", server.url, "-u", "alice")
    assert result.code == 0, result.err
    assert prompts == ["Password: "]
    assert config_of(cairn_env)["token"] == TOKEN


def test_login_with_a_wrong_password_saves_nothing(run, server, cairn_env):
    result = run("login", "--url", server.url, "-u", "alice", "--password-stdin", stdin="no\n")
    assert_clean_error(result, "error (401): Wrong username or password.")
    assert "cairn login" not in result.err  # no "run `cairn login`" hint while logging in
    assert not cairn_env.exists()


def test_login_to_a_server_that_is_down(run, refused_url, cairn_env):
    result = run("login", "--url", refused_url, "-u", "alice", "--password-stdin", stdin="pw\n")
    assert_clean_error(result, "connection refused")
    assert not cairn_env.exists()


def test_logout_revokes_and_forgets_the_token(run, logged_in, cairn_env):
    result = run("logout")
    assert result.code == 0
    assert "revoked the token" in result.out
    assert "token" not in config_of(cairn_env)
    assert config_of(cairn_env)["project"] == "vision"
    assert logged_in.tokens == []
    assert run("logout").out.strip() == "Not logged in."


# -- errors every command shares ---------------------------------------------------------------


def test_not_logged_in(run):
    result = run("ls")
    assert_clean_error(result, "error: not logged in — run `cairn login`")


def test_rejected_token_suggests_logging_in_again(run, logged_in, cairn_env):
    data = config_of(cairn_env) | {"token": "cairn_ffffffffffff_wrong"}
    cairn_env.write_text(json.dumps(data))
    result = run("ls")
    assert_clean_error(result, "error (401): Invalid token — run `cairn login`")


def test_connection_refused_is_one_friendly_line(run, refused_url, monkeypatch):
    monkeypatch.setenv("CAIRN_URL", refused_url)
    monkeypatch.setenv("CAIRN_TOKEN", TOKEN)
    monkeypatch.setenv("CAIRN_PROJECT", "vision")
    result = run("ls")
    assert_clean_error(result, f"error: cannot connect to {refused_url}: connection refused")
    assert len(result.err.strip().splitlines()) == 1


def test_unknown_project_is_404(run, logged_in):
    result = run("ls", "--project", "nope")
    assert_clean_error(result, "error (404): Not found.")


def test_usage_errors_exit_2(run):
    assert run("ls", "--status", "sleeping").code == 2
    assert run("frobnicate").code == 2
    assert run("logs", "x", "--tail", "0").code == 2


def test_help_and_version_exit_0(run):
    assert run("--version").out.strip() == "cairn " + cli.__version__
    assert run("--help").code == 0


def test_unexpected_bugs_are_one_line_too(run, logged_in, monkeypatch):
    def boom(app):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(cli, "cmd_ls", boom)
    result = run("ls")
    assert_clean_error(result, "unexpected RuntimeError: kaboom")


# -- projects ------------------------------------------------------------------------------------


def test_projects_table(run, logged_in):
    result = run("projects")
    assert result.code == 0
    lines = result.out.splitlines()
    assert any("SLUG" in line and "ROLE" in line for line in lines)
    vision = next(line for line in lines if " vision " in line)
    assert vision.lstrip().startswith("*") and "Vision" in vision and "owner" in vision
    assert any("nlp" in line and "viewer" in line for line in lines)


def test_use_sets_the_default_project(run, logged_in, cairn_env):
    assert run("use", "nlp").code == 0
    assert config_of(cairn_env)["project"] == "nlp"
    assert_clean_error(run("use", "nope"), "you have no project 'nope'")


def test_without_a_default_project_the_choice_is_explained(run, logged_in, cairn_env):
    cairn_env.write_text(json.dumps(config_of(cairn_env) | {"project": None}))
    result = run("ls")
    assert_clean_error(result, "no project selected")
    assert "vision, nlp" in result.err


def test_the_only_project_is_the_default(run, logged_in, cairn_env):
    logged_in.projects = logged_in.projects[:1]
    data = config_of(cairn_env)
    del data["project"]
    cairn_env.write_text(json.dumps(data))
    logged_in.add_workload(name="mnist")
    result = run("ls")
    assert result.code == 0 and "mnist" in result.out


# -- submit --------------------------------------------------------------------------------------


JOB = """\
kind: {kind}
name: mnist
command: python train.py --epochs 3
replicas: 2
resources: {{gpu: 0, cpu: 1, memory: 1Gi}}
priority: P3
max_restarts: 1
env: {{LR: "0.01"}}
"""


@pytest.mark.parametrize(("kind", "route"), [
    ("training", "training-jobs"), ("notebook", "notebooks"), ("deployment", "deployments")])
def test_submit_posts_the_body_to_the_kinds_route(run, logged_in, tmp_path, kind, route):
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(kind=kind))
    result = run("submit", str(job))
    assert result.code == 0, result.err
    post = logged_in.find("POST")[-1]
    assert post.path == f"/api/v1/projects/vision/{route}/"
    assert post.body == {
        "name": "mnist", "command": "python train.py --epochs 3", "replicas": 2,
        "resources": {"gpu": 0, "cpu": 1, "memory": "1Gi"}, "priority": "P3",
        "max_restarts": 1, "env": {"LR": "0.01"},
    }
    assert f"Submitted {kind} mnist (id 1) to project vision: queued" in result.out


def test_submit_with_a_run_time_limit(run, logged_in, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("command: x\nmax_runtime: 1h\n")
    assert run("submit", str(job)).code == 0
    assert logged_in.find("POST")[-1].body["max_runtime_seconds"] == 3600
    result = run("submit", str(job), "--max-runtime", "2h30m")  # the flag wins over the file
    assert result.code == 0, result.err
    assert logged_in.find("POST")[-1].body == {"command": "x", "max_runtime_seconds": 9000}
    assert logged_in.workloads[2]["max_runtime_seconds"] == 9000


@pytest.mark.parametrize(("value", "message"), [
    ("soon", "argument --max-runtime: expected a duration like 90m, 2h, 1h30m, 1d or H:MM:SS, got 'soon'"),
    ("120", "argument --max-runtime: '120' has no unit: write 120s, 120m or 120h"),
])
def test_submit_with_a_bad_run_time_limit_is_a_usage_error(run, logged_in, tmp_path, value, message):
    job = tmp_path / "job.yaml"
    job.write_text("command: x\n")
    result = run("submit", str(job), "--max-runtime", value)
    assert result.code == 2
    assert message in result.err and "Traceback" not in result.err
    assert logged_in.requests == []


def test_submit_with_a_run_time_limit_the_server_refuses_shows_its_field_error(run, logged_in, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("command: x\n")
    result = run("submit", str(job), "--max-runtime", "30s")
    assert_clean_error(result, "error (400): Invalid input.")
    assert "  max_runtime_seconds: The run-time limit must be at least 60 seconds." in result.err


def test_submit_project_precedence(run, logged_in, tmp_path):
    logged_in.projects[1]["role"] = "member"
    job = tmp_path / "job.yaml"
    job.write_text("project: nlp\ncommand: [python, x.py]\n")
    assert run("submit", str(job)).code == 0
    assert logged_in.find("POST")[-1].path == "/api/v1/projects/nlp/training-jobs/"
    assert run("submit", str(job), "--project", "vision").code == 0
    assert logged_in.find("POST")[-1].path == "/api/v1/projects/vision/training-jobs/"


def test_submit_reads_stdin(run, logged_in):
    result = run("submit", "-", stdin="kind: notebook\nname: lab\n")
    assert result.code == 0, result.err
    assert logged_in.find("POST")[-1].path == "/api/v1/projects/vision/notebooks/"


def test_submit_checks_the_file_before_calling_the_server(run, logged_in, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("kind: batch\ncommand: x\n")
    assert_clean_error(run("submit", str(job)), "unknown kind 'batch' (this server runs: training, notebook")
    assert [(r.method, r.path) for r in logged_in.requests] == [("GET", "/api/v1/kinds/")]  # nothing created
    logged_in.requests.clear()
    assert_clean_error(run("submit", str(tmp_path / "missing.yaml")), "no such file")
    job.write_text("- a list\n")
    assert_clean_error(run("submit", str(job)), "expected a mapping")
    assert logged_in.requests == []


def test_submit_shows_the_servers_field_errors(run, logged_in, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: mnist\npriority: P9\n")
    result = run("submit", str(job))
    assert_clean_error(result, "error (400): Invalid input.")
    assert "  command: This field is required." in result.err
    assert '  priority: "P9" is not a valid choice.' in result.err


def test_submit_to_a_read_only_project_is_403(run, logged_in, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("command: x\n")
    assert_clean_error(run("submit", str(job), "-p", "nlp"), "error (403): Your role")


def test_submit_name_conflict_is_409(run, logged_in, tmp_path):
    logged_in.add_workload(name="mnist", status="running")
    job = tmp_path / "job.yaml"
    job.write_text("name: mnist\ncommand: x\n")
    assert_clean_error(run("submit", str(job)), "error (409): A workload named 'mnist'")


def test_submit_follow_waits_streams_and_exits_with_the_outcome(run, logged_in, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: mnist\ncommand: x\n")
    logged_in.statuses[1] = ["queued", "admitted", "running"]
    logged_in.log_chunks[1] = ["epoch 1\n", "epoch 2\n"]
    logged_in.finish_with[1] = "succeeded"
    result = run("submit", str(job), "--follow")
    assert result.code == 0, result.err
    assert result.out.endswith("epoch 1\nepoch 2\n")
    assert "mnist: queued — Waiting for the scheduler." in result.err
    assert "mnist: admitted" in result.err
    assert "mnist: succeeded" in result.err
    assert logged_in.find("GET", "/logs/")[-1].query["follow"] == ["1"]


def test_submit_follow_of_a_failing_job_exits_1(run, logged_in, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: mnist\ncommand: x\n")
    logged_in.statuses[1] = ["running", "running", "failed"]
    logged_in.log_chunks[1] = ["Traceback: boom\n"]
    result = run("submit", str(job), "-f")
    assert result.code == 1
    assert "Traceback: boom" in result.out  # the job's own output, not ours
    assert "error: mnist failed" in result.err


# -- ls / get / events ---------------------------------------------------------------------------


def test_ls_table_has_a_row_per_workload(run, logged_in):
    logged_in.add_workload(name="mnist", status="running", replicas=2,
                           resources={"gpu": 1.0, "cpu": 4.0, "memory_mb": 8192})
    logged_in.add_workload(kind="notebook", name="lab", status="queued",
                           pending_reason="Quota 'vision/local' is full (gpu 4/4).")
    result = run("ls")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    header = next(line for line in lines if "NAME" in line)
    for column in ("ID", "KIND", "STATUS", "REPLICAS", "GPU", "PRIORITY", "AGE", "REASON"):
        assert column in header
    mnist = next(line for line in lines if "mnist" in line)
    assert mnist.split()[:7] == ["1", "mnist", "training", "running", "2", "1", "P3"]
    lab = next(line for line in lines if " lab " in line)
    assert "notebook" in lab and "queued" in lab and "Quota 'vision/local' is full" in lab
    assert lines.index(lab) < lines.index(mnist)  # newest first


def test_ls_passes_filters_and_says_when_nothing_matches(run, logged_in):
    result = run("ls", "--kind", "notebook", "--status", "running", "--status", "queued")
    assert result.code == 0
    assert "No workloads in project vision match these filters." in result.out
    query = logged_in.find("GET", "/workloads/")[-1].query
    assert query["kind"] == ["notebook"] and query["status"] == ["running", "queued"]


def test_ls_shows_the_newest_and_all_shows_everything(run, logged_in):
    logged_in.page_size = 10
    for i in range(60):
        logged_in.add_workload(name=f"job-{i}")
    result = run("ls")
    assert "job-59" in result.out and "job-9 " not in result.out
    assert "Showing 50 of 60 workloads; use --all" in result.err
    result = run("ls", "--all")
    assert "job-0 " in result.out and "Showing" not in result.err


def test_ls_json(run, logged_in):
    logged_in.add_workload(name="mnist")
    data = json.loads(run("ls", "--json").out)
    assert [w["name"] for w in data] == ["mnist"]


def test_get_resolves_the_name_and_shows_the_details(run, logged_in):
    logged_in.add_workload(name="other")
    logged_in.add_workload(
        name="mnist", status="failed", exit_code=3, status_reason="Error",
        status_message="replica 0 exited with code 3",
        spec={"command": ["python", "train.py"]},
        conditions=[{"type": "Admitted", "status": "True", "reason": "QuotaReserved",
                     "message": "fits", "time": "2026-01-01T00:00:00Z"}],
        placement=[{"replica": 0, "node": "node-a"}],
    )
    result = run("get", "mnist")
    assert result.code == 0, result.err
    assert logged_in.find("GET", "/workloads/")[-1].query["name"] == ["mnist"]
    assert logged_in.requests[-1].path == "/api/v1/projects/vision/training-jobs/2/"
    out = result.out
    for expected in ("mnist", "failed (Error)", "replica 0 exited with code 3", "Exit code",
                     "python train.py", "node=node-a", "QuotaReserved"):
        assert expected in out


def test_get_shows_the_run_time_limit_and_its_outcome(run, logged_in):
    logged_in.add_workload(name="limited", status="failed", max_runtime_seconds=5400,
                           status_reason="DeadlineExceeded",
                           status_message="Stopped after reaching its run-time limit of 1h30m.")
    logged_in.add_workload(name="unlimited")
    out = run("get", "limited").out
    assert "Run-time limit  1h30m" in out and "failed (DeadlineExceeded)" in out
    assert "Run-time limit" not in run("get", "unlimited").out


def test_get_says_what_a_queued_workload_waits_on(run, logged_in):
    logged_in.add_workload(name="big", status="queued", waiting_on="quota_lendable",
                           pending_reason="quota: project 'vision' has 0 of its nominal 8 GPU free")
    out = run("get", "big").out
    assert "quota: project 'vision' has 0 of its nominal" in out
    assert next(line for line in out.splitlines() if "Waiting on" in line).split()[-3:] == ["nothing", "to", "borrow"]
    logged_in.add_workload(name="done", status="succeeded", waiting_on=None)
    assert "Waiting on" not in run("get", "done").out


def test_get_shows_the_endpoint_when_the_api_gives_one(run, logged_in):
    logged_in.add_workload(kind="notebook", name="nb", status="running",
                           endpoint="/nb/vision/1/lab")
    logged_in.add_workload(kind="training", name="job", spec={"command": ["python"], "working_dir": "src"})
    out = run("get", "nb").out
    endpoint = next(line for line in out.splitlines() if line.startswith("Endpoint"))
    assert endpoint.split()[-1].endswith("/nb/vision/1/lab")
    assert endpoint.split()[-1].startswith("http://")
    out = run("get", "job").out
    assert "Endpoint" not in out and "Working dir" in out


def test_get_by_id(run, logged_in):
    logged_in.add_workload(kind="deployment", name="api")
    result = run("get", "1", "--json")
    assert json.loads(result.out)["name"] == "api"
    assert logged_in.requests[-1].path == "/api/v1/projects/vision/deployments/1/"


def test_get_unknown_name(run, logged_in):
    assert_clean_error(run("get", "ghost"), "error: no workload named 'ghost' in project 'vision'")


# -- queue -----------------------------------------------------------------------------------------


def _queue_entry(position, *, mine=True, **fields):
    entry = {"position": position, "id": None, "name": None, "project": None, "kind": "training",
             "priority": "P3", "replicas": 1, "resources": {"gpu": 1.0, "cpu": 4.0, "memory_mb": 8192},
             "gpu_model": "", "pending_reason": None, "estimated_start": None,
             "submitted_at": "2026-01-01T00:00:00Z", "mine": mine}
    entry.update(fields)
    return entry


def test_queue_shows_the_pools_queue_in_order_with_reasons_and_starts(run, logged_in, monkeypatch):
    soon = (datetime.now(UTC) + timedelta(hours=2, minutes=5)).isoformat().replace("+00:00", "Z")
    logged_in.queues["local"] = [
        _queue_entry(1, mine=False, priority="P1", replicas=2, resources={"gpu": 8.0, "cpu": 64, "memory_mb": 1},
                     waiting_on="quota_lent"),
        _queue_entry(2, id=7, name="resnet", project="vision", estimated_start=soon, waiting_on="reserved",
                     pending_reason="reserved: pool 'local' is full for 1 replica(s) of 8 GPU"),
    ]
    result = run("queue")  # the only pool
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    header = next(line for line in lines if "POS" in line)
    for column in ("ID", "NAME", "PROJECT", "PRI", "REPL", "GPU", "WAIT", "START", "REASON"):
        assert column in header
    other = next(line for line in lines if line.split()[:1] == ["1"])
    assert other.split()[:7] == ["1", "-", "-", "-", "P1", "2", "8"]
    assert "(another project's) nominal lent out" in other  # what it waits on names no project
    mine = next(line for line in lines if "resnet" in line)
    assert mine.split()[:7] == ["2", "7", "resnet", "vision", "P3", "1", "1"]
    assert "in 2h" in mine and "reserved: pool 'local' is full" in mine
    assert lines.index(other) < lines.index(mine)
    assert logged_in.find("GET", "/pools/local/queue/")

    monkeypatch.setenv("COLUMNS", "80")  # a narrow terminal: every column still readable
    narrow = run("queue").out.splitlines()
    assert all(len(line) <= 80 for line in narrow), "\n".join(narrow)
    mine = next(line for line in narrow if "resnet" in line)
    assert mine.split()[:7] == ["2", "7", "resnet", "vision", "P3", "1", "1"] and "in 2h" in mine
    assert "reserved:" in mine  # the reason starts on the row, folded below it

    mine_only = run("queue", "local", "--mine", "--json")
    assert [w["name"] for w in json.loads(mine_only.out)] == ["resnet"]


def test_queue_filters_by_what_work_waits_on(run, logged_in):
    logged_in.queues["local"] = [_queue_entry(1, mine=False, waiting_on="capacity"),
                                 _queue_entry(2, id=7, name="resnet", project="vision", waiting_on="reserved",
                                              pending_reason="reserved: pool 'local' is full")]
    result = run("queue", "--waiting-on", "reserved", "--waiting-on", "quota_lent", "--json")
    assert result.code == 0, result.err
    assert [w["position"] for w in json.loads(result.out)] == [2]
    assert logged_in.find("GET", "/pools/local/queue/")[-1].query["waiting_on"] == ["reserved", "quota_lent"]
    assert "Nothing is queued on pool local waiting on budget." in run("queue", "--waiting-on", "budget").out
    refused = run("queue", "--waiting-on", "gpus")  # argparse's usage error, naming the kinds there are
    assert refused.code == 2 and "invalid choice: 'gpus'" in refused.err and "quota_lendable" in refused.err


def test_queue_needs_a_pool_when_there_are_several_and_names_a_missing_one(run, logged_in):
    logged_in.pools.append({"id": 2, "name": "a100", "cluster": "gpu"})
    assert_clean_error(run("queue"), "give a pool: local, a100", code=2)
    assert_clean_error(run("queue", "h100"), "error (404): Resource pool not found.")
    assert "Pool a100 has no queue." in run("queue", "a100").out


def test_events_table(run, logged_in):
    w = logged_in.add_workload(name="mnist")
    logged_in.events[w["id"]] = [
        {"id": 1, "time": "2026-01-01T00:00:00Z", "type": "Normal", "reason": "Submitted",
         "message": "by alice", "from_status": "", "to_status": "queued"},
        {"id": 2, "time": "2026-01-01T00:00:05Z", "type": "Normal", "reason": "Admitted",
         "message": "fits in quota", "from_status": "queued", "to_status": "admitted"},
    ]
    result = run("events", "mnist")
    assert result.code == 0, result.err
    assert logged_in.requests[-1].path == "/api/v1/projects/vision/training-jobs/1/events/"
    admitted = next(line for line in result.out.splitlines() if "Admitted" in line)
    assert "queued → admitted" in admitted and "fits in quota" in admitted


# -- logs / stop / delete ------------------------------------------------------------------------


def test_logs_tail_and_replica(run, logged_in):
    w = logged_in.add_workload(name="mnist", status="running", replicas=2)
    logged_in.log_chunks[w["id"]] = ["one\n", "two\n", "three\n"]
    result = run("logs", "mnist", "--tail", "2", "--replica", "1")
    assert result.code == 0 and result.out == "two\nthree\n"
    query = logged_in.requests[-1].query
    assert query["tail"] == ["2"] and query["replica"] == ["1"] and "follow" not in query


def test_logs_follow_streams_until_the_end(run, logged_in):
    w = logged_in.add_workload(name="mnist", status="running")
    gate = threading.Event()
    logged_in.log_chunks[w["id"]] = ["step 1\n", gate, "step 2\n"]
    written = []
    original = cli.App.write_raw

    def spy(app, text):
        written.append(text)
        if text == "step 1\n":
            gate.set()  # the server sends the rest only after we printed the first chunk
        original(app, text)

    cli.App.write_raw = spy
    try:
        result = run("logs", "mnist", "-f")
    finally:
        cli.App.write_raw = original
    assert result.code == 0, result.err
    assert result.out == "step 1\nstep 2\n"
    assert written[0] == "step 1\n" and logged_in.gate_results == [True]
    assert logged_in.requests[-1].query["follow"] == ["1"]


def test_logs_follow_of_a_queued_job_waits_for_it_to_start(run, logged_in):
    w = logged_in.add_workload(name="mnist", status="queued", pending_reason="No GPU free.")
    logged_in.statuses[w["id"]] = ["queued", "running"]
    logged_in.log_chunks[w["id"]] = ["hello\n"]
    result = run("logs", "mnist", "-f")
    assert result.code == 0
    assert "mnist: queued — No GPU free." in result.err
    assert result.out == "hello\n"


def test_stop_by_name(run, logged_in):
    logged_in.add_workload(name="mnist", status="running")
    result = run("stop", "mnist")
    assert result.code == 0
    assert logged_in.requests[-1].method == "POST"
    assert logged_in.requests[-1].path == "/api/v1/projects/vision/training-jobs/1/stop/"
    assert "Stopping training mnist (id 1): stopping" in result.out


def test_start_a_stopped_notebook_again(run, logged_in):
    logged_in.add_workload(kind="notebook", name="nb", status="stopped")
    result = run("start", "nb")
    assert result.code == 0, result.err
    assert logged_in.requests[-1].method == "POST"
    assert logged_in.requests[-1].path == "/api/v1/projects/vision/notebooks/1/start/"
    assert "Starting notebook nb (id 1) again (its files are kept): queued" in result.out
    again = run("start", "nb")
    assert again.code != 0 and "only a stopped notebook" in again.err


def test_start_refuses_other_kinds_and_points_to_rerun(run, logged_in):
    logged_in.add_workload(name="mnist", status="stopped")
    result = run("start", "mnist")
    assert result.code != 0 and "only notebooks are started again" in result.err
    assert "cairn rerun mnist" in " ".join(result.err.split())


def test_rerun_an_ended_job_as_a_new_linked_workload(run, logged_in):
    logged_in.add_workload(name="mnist", status="failed")
    result = run("rerun", "mnist")
    assert result.code == 0, result.err
    assert (logged_in.requests[-1].method, logged_in.requests[-1].path) == (
        "POST", "/api/v1/projects/vision/training-jobs/1/resubmit/")
    assert "Running training mnist (id 1) again as training mnist-2 (id 2): queued" in result.out
    named = run("rerun", "mnist", "--name", "mnist-fixed")
    assert named.code == 0 and "as training mnist-fixed" in named.out
    running = run("rerun", "mnist-2")
    assert running.code != 0 and "once it has ended" in running.err


def test_stop_of_a_finished_job_is_409(run, logged_in):
    logged_in.add_workload(name="mnist", status="succeeded")
    assert_clean_error(run("stop", "mnist"), "error (409): The workload has already succeeded.")


def test_delete_by_name(run, logged_in):
    logged_in.add_workload(kind="notebook", name="lab", status="stopped")
    result = run("delete", "lab")
    assert result.code == 0
    assert logged_in.requests[-1].method == "DELETE"
    assert logged_in.requests[-1].path == "/api/v1/projects/vision/notebooks/1/"
    assert "Deleted notebook lab (id 1)." in result.out


def test_delete_of_a_running_job_is_409(run, logged_in):
    logged_in.add_workload(name="mnist", status="running")
    assert_clean_error(run("delete", "mnist"),
                       "error (409): Only finished workloads can be deleted; stop it first.")


def test_brackets_in_names_and_messages_are_shown_as_they_are(run, logged_in):
    logged_in.add_workload(name="sweep", status_message="bad value [lr] in [bold]config[/bold]",
                           status="failed", spec={"command": ["python", "-c", "print([1])"]})
    out = run("ls").out + run("get", "sweep").out
    assert "bad value [lr] in [bold]config[/bold]" in out
    assert "python -c 'print([1])'" in out


def test_quotas_show_gpus_cpu_memory_and_what_queued_work_waits_on(run, logged_in):
    logged_in.quotas["vision"] = [{
        "id": 1, "project": "vision", "pool": "local", "nominal_gpu_milli": 0, "nominal_cpu_milli": 8000,
        "nominal_memory_mb": 16384,
        "usage": {"allocated_gpu_milli": 0, "allocated_cpu_milli": 6000, "allocated_memory_mb": 2048,
                  "queued_gpu_milli": 0, "queued_cpu_milli": 16000, "queued_memory_mb": 1024,
                  "waiting": [{"waiting_on": "quota_lendable", "workloads": 1, "gpu_milli": 0, "cpu_milli": 16000,
                               "memory_mb": 1024, "resources": ["cpu"]}],
                  "budget_left_gpu_hours": None},
    }]
    result = run("quotas")
    assert result.code == 0, result.err
    header = next(line for line in result.out.splitlines() if "POOL" in line)
    for column in ("GPU", "CPU", "MEM", "QUEUED", "WAITING ON", "BUDGET LEFT"):
        assert column in header
    row = next(line for line in result.out.splitlines() if line.startswith("local"))
    assert row.split()[:7] == ["local", "0/0", "6/8", "2G/16G", "16", "CPU", "1G"]
    assert "1 on nothing to borrow (cpu)" in row
    assert logged_in.find("GET", "/projects/vision/quotas/")
    assert json.loads(run("quotas", "--json").out)[0]["usage"]["queued_cpu_milli"] == 16000


def test_queue_shows_cpu_and_memory_beside_gpus(run, logged_in):
    logged_in.queues["local"] = [_queue_entry(1, id=7, name="cpu-job", project="vision", waiting_on="quota_lendable",
                                              resources={"gpu": 0.0, "cpu": 16.0, "memory_mb": 2048},
                                              pending_reason="quota: no CPU to borrow")]
    lines = run("queue").out.splitlines()
    header = next(line for line in lines if "POS" in line)
    assert "CPU" in header and "MEM" in header
    row = next(line for line in lines if "cpu-job" in line)
    assert row.split()[:9] == ["1", "7", "cpu-job", "vision", "P3", "1", "0", "16", "2G"]


def test_every_submit_carries_an_idempotency_key(run, logged_in, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("command: x\n")
    assert run("submit", str(job)).code == 0
    assert run("submit", str(job)).code == 0
    first, second = (p.headers.get("Idempotency-Key") for p in logged_in.find("POST")[-2:])
    assert first and second and first != second
    assert run("submit", str(job), "--idempotency-key", "nightly-42").code == 0
    assert logged_in.find("POST")[-1].headers["Idempotency-Key"] == "nightly-42"
def test_a_job_file_asks_for_an_accelerator_and_arch_and_get_shows_them(run, logged_in, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("command: x\naccelerator: {type: ascend, model: 910B3, count: 8}\narch: arm64\n")
    assert run("submit", str(job)).code == 0
    body = logged_in.find("POST")[-1].body
    assert body["accelerator"] == {"type": "ascend", "model": "910B3", "count": 8} and body["arch"] == "arm64"
    logged_in.add_workload(name="npu", accelerator={"type": "ascend", "model": "910B3", "count": 8.0},
                           arch=["arm64"])
    out = run("get", "npu").out
    assert "8 x ascend 910B3" in out and "arm64" in out


# -- deployments: replicas, autoscaling, gateway, rollout of a stopped one (issue 46, item 6) ---


def test_get_shows_a_deployments_gateway_replicas_and_autoscaling(run, logged_in):
    logged_in.add_workload(
        kind="deployment", name="digits", status="running", replicas=3,
        status_reason="Started", status_message="Started 1 replica(s).",
        gateway_url="http://127.0.0.1:8000/serve/vision/digits/",
        spec={"command": "python serve.py", "readiness_path": "/healthz", "public": False,
              "autoscaling": {"min_replicas": 1, "max_replicas": 5, "target_concurrency": 2.0}},
        scale={"desired": 4, "admitted": 3, "ready": 3,
               "autoscaling": {"min_replicas": 1, "max_replicas": 5, "target_concurrency": 2.0,
                               "stable_window_seconds": 60.0, "panic_window_seconds": 6.0}})
    result = run("get", "digits")
    assert result.code == 0, result.err
    lines = {line.split("  ")[0]: line for line in result.out.splitlines() if line.strip()}
    assert lines["Gateway"].split()[-1] == "http://127.0.0.1:8000/serve/vision/digits/"
    assert lines["Autoscaling"].split(None, 1)[1].strip() == (
        "1-5 replicas, 2 requests in flight per replica (windows 60s stable, 6s panic)")
    assert lines["Replicas"].split(None, 1)[1].strip() == "3 ready of 4 desired (3 admitted)"
    assert "/healthz" in lines["Readiness"]
    logged_in.add_workload(kind="deployment", name="fixed", status="stopped", replicas=2,
                           gateway_url="http://127.0.0.1:8000/serve/vision/fixed/", spec={"command": "serve"})
    out = run("get", "fixed").out
    assert "off (a fixed count)" in out and "/serve/vision/fixed/" in out


def test_rollout_status_of_a_stopped_deployment_is_not_complete(run, logged_in):
    logged_in.add_workload(kind="deployment", name="live", status="running")
    live = run("rollout", "status", "live")
    assert live.code == 0, live.err
    assert "Revision 1 — complete" in live.out
    logged_in.add_workload(kind="deployment", name="gone", status="stopped")
    gone = run("rollout", "status", "gone")
    assert gone.code == 0, gone.err
    assert "complete" not in gone.out and "in progress" not in gone.out
    assert "not running (stopped)" in gone.out
