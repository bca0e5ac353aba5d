"""The in-job logger without Django: batching, retries with the same batch id, a bounded buffer,
never blocking or raising while the server is away, flushing at exit, system metrics from fake
NVML/psutil modules and gradient norms from a fake model (torch is not installed here)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from cairn import tracking
from cairn.tracking.grads import grad_norms, log_grad_norms
from cairn.tracking.run import Run
from cairn.tracking.system import SystemSampler, gpu_sample

RUN_TOKEN = "cairnrun_0123456789ab_secret"


class IngestServer:
    """Answers POST .../runs/<id>/batches/ and /finish/; scripted failures via `fail_next`."""

    def __init__(self):
        self.batches: list[dict] = []
        self.finished: list[dict] = []
        self.created: list[dict] = []
        self.fail_next: list[int] = []
        self.delay = 0.0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                time.sleep(outer.delay)
                if outer.fail_next:
                    self._answer(outer.fail_next.pop(0), {"detail": "scripted failure"})
                    return
                if self.path.endswith("/runs/"):
                    outer.created.append(body)
                    self._answer(201, {"id": 7, "run_token": RUN_TOKEN})
                elif self.path.endswith("/finish/"):
                    outer.finished.append({"path": self.path, "auth": self.headers["Authorization"], **body})
                    self._answer(200, {"status": body.get("status")})
                else:
                    outer.batches.append({"path": self.path, "auth": self.headers["Authorization"], **body})
                    self._answer(200, {"points": len(body.get("points", [])), "params": 0, "duplicate": False})

            def _answer(self, status, data):
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def points(self) -> list[dict]:
        return [p for b in self.batches for p in b["points"]]

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def ingest():
    server = IngestServer()
    yield server
    server.stop()


def _run(url, **kw) -> Run:
    kw.setdefault("system_metrics", False)
    kw.setdefault("flush_interval", 0.05)
    return Run(url=url, project="vision", run_id=7, run_token=RUN_TOKEN, **kw)


def test_points_are_batched_and_sent_with_the_run_token(ingest):
    run = _run(ingest.url, batch_size=1000)
    for step in range(2500):
        run.log({"loss": 1.0 / (step + 1), "acc": step / 2500}, step=step)
    run.log_params({"lr": 0.1, "layers": 3, "opt": object()})
    assert run.finish(timeout=10)
    points = ingest.points()
    assert len(points) == 5000 and len(ingest.batches) >= 5
    assert all(len(b["points"]) <= 1000 for b in ingest.batches)
    assert all(b["auth"] == f"Bearer {RUN_TOKEN}" and b["path"] == "/api/v1/projects/vision/runs/7/batches/"
               for b in ingest.batches)
    params = {k: v for b in ingest.batches for k, v in b.get("params", {}).items()}
    assert params["lr"] == 0.1 and params["layers"] == 3 and params["opt"].startswith("<object")
    assert ingest.finished == [{"path": "/api/v1/projects/vision/runs/7/finish/", "auth": f"Bearer {RUN_TOKEN}",
                                "status": "finished"}]


def test_auto_steps_and_bad_values_are_skipped_not_raised(ingest, caplog):
    run = _run(ingest.url)
    run.log({"a": 1})
    run.log({"a": 2, "b": float("nan"), "c": "text", "bad key": 1, "d": float("inf")})
    run.log({"a": 3}, step=10)
    run.log({"a": 4})
    run.log({"a": 5}, step=-1)
    run.log({"a": SimpleNamespace(item=lambda: 6.5)})  # numpy / torch scalars expose .item()
    run.finish(timeout=10)
    assert [(p["key"], p["step"], p["value"]) for p in ingest.points()] == [
        ("a", 0, 1.0), ("a", 1, 2.0), ("a", 10, 3.0), ("a", 11, 4.0), ("a", 12, 6.5)]
    assert "not a finite number" in caplog.text and "invalid metric key" in caplog.text


def test_retries_reuse_the_batch_id(ingest):
    ingest.fail_next = [503, 500, 429]
    run = _run(ingest.url)
    run.sender.backoff_max = 0.05
    run.log({"loss": 1.0}, step=0)
    assert run.finish(timeout=10)
    assert len(ingest.batches) == 1 and run.sender.stats.retries == 3
    assert ingest.points()[0]["value"] == 1.0


def test_rejected_batch_is_dropped_and_logging_goes_on(ingest):
    ingest.fail_next = [400]
    run = _run(ingest.url)
    run.log({"loss": 1.0}, step=0)
    assert run.flush(timeout=10)
    run.log({"loss": 2.0}, step=1)
    assert run.finish(timeout=10)
    assert [p["value"] for p in ingest.points()] == [2.0]
    assert run.sender.stats.rejected_points == 1


def test_server_away_never_blocks_and_the_buffer_is_bounded(refused_url):
    run = _run(refused_url, max_buffer=10_000, batch_size=1000)
    started = time.perf_counter()
    for step in range(50_000):
        run.log({"loss": float(step)}, step=step)
    elapsed = time.perf_counter() - started
    assert elapsed < 5.0  # ~microseconds per call, no network on the caller's thread
    assert run.sender.pending() <= 10_000 + 1000
    assert run.sender.stats.dropped_points >= 39_000
    started = time.perf_counter()
    assert run.finish(timeout=0.5) is False  # gives up after its timeout, does not raise
    assert time.perf_counter() - started < 3.0


def test_standalone_run_is_created_lazily_with_a_client_id(ingest):
    ingest.fail_next = [502]  # the first create attempt fails: retried with the same client id
    run = Run(url=ingest.url, project="vision", api_token="cairn_abc_def", name="sweep", system_metrics=False,
              flush_interval=0.05)
    run.sender.backoff_max = 0.05
    run.log({"x": 1.0})
    assert run.finish(timeout=10)
    assert len(ingest.created) == 1 and ingest.created[0]["name"] == "sweep"
    assert run.id == 7 and ingest.batches[0]["auth"] == f"Bearer {RUN_TOKEN}"


def test_refused_token_disables_tracking_quietly(ingest, caplog):
    ingest.fail_next = [401]
    run = _run(ingest.url)
    run.log({"x": 1.0})
    run.flush(timeout=5)
    run.log({"x": 2.0})  # ignored, no exception
    run.finish(timeout=1)
    assert ingest.batches == [] and "tracking disabled" in caplog.text


def test_module_api_before_init_is_a_no_op():
    tracking.finish()
    tracking.log({"x": 1})
    tracking.log_params({"y": 2})
    assert tracking.current_run() is None


def test_flush_at_exit_without_finish(ingest, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import cairn
        cairn.init(system_metrics=False)
        for step in range(300):
            cairn.log({"loss": step * 0.5}, step=step)
        print("done")
    """))
    env = {"PATH": "/usr/bin:/bin", "CAIRN_API_URL": ingest.url, "CAIRN_PROJECT": "vision", "CAIRN_RUN_ID": "7",
           "CAIRN_RUN_TOKEN": RUN_TOKEN}
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert len(ingest.points()) == 300 and ingest.finished[0]["status"] == "finished"


def test_init_without_configuration_says_what_is_missing(monkeypatch, tmp_path):
    for var in ("CAIRN_API_URL", "CAIRN_URL", "CAIRN_PROJECT", "CAIRN_RUN_TOKEN", "CAIRN_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="no server URL or project"):
        tracking.init(system_metrics=False)


class FakeNvml:
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, gpus):
        self.gpus = gpus

    def nvmlDeviceGetCount(self):  # noqa: N802 - pynvml's names
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        return self.gpus[index]

    def nvmlDeviceGetUtilizationRates(self, h):  # noqa: N802
        return SimpleNamespace(gpu=h["util"], memory=0)

    def nvmlDeviceGetMemoryInfo(self, h):  # noqa: N802
        return SimpleNamespace(used=h["used"], total=h["total"], free=h["total"] - h["used"])

    def nvmlDeviceGetTemperature(self, h, sensor):  # noqa: N802
        return h["temp"]

    def nvmlDeviceGetPowerUsage(self, h):  # noqa: N802
        if h.get("no_power"):
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return h["mw"]


def test_gpu_sample_reads_every_gpu_and_skips_unsupported_fields():
    nvml = FakeNvml([
        {"util": 87, "used": 40 * 2**30, "total": 80 * 2**30, "temp": 71, "mw": 312_500},
        {"util": 3, "used": 2**30, "total": 80 * 2**30, "temp": 40, "no_power": True},
    ])
    sample = gpu_sample(nvml)
    assert sample["system/gpu0/util_percent"] == 87 and sample["system/gpu0/memory_used_mb"] == 40 * 1024
    assert sample["system/gpu0/memory_percent"] == 50.0 and sample["system/gpu0/temperature_c"] == 71
    assert sample["system/gpu0/power_w"] == 312.5
    assert "system/gpu1/power_w" not in sample and sample["system/gpu1/util_percent"] == 3


def test_system_sampler_logs_host_and_gpu_metrics(ingest):
    run = _run(ingest.url)
    fake_psutil = SimpleNamespace(cpu_percent=lambda interval=None: 42.0,
                                  virtual_memory=lambda: SimpleNamespace(percent=55.5, used=3 * 2**30))
    nvml = FakeNvml([{"util": 50, "used": 2**30, "total": 2**31, "temp": 60, "mw": 100_000}])
    sampler = SystemSampler(run, interval=0.05, nvml=nvml, psutil=fake_psutil)
    sampler.start()
    time.sleep(0.4)
    sampler.stop()
    run.finish(timeout=10)
    keys = {p["key"] for p in ingest.points()}
    assert {"system/cpu_percent", "system/memory_percent", "system/gpu0/util_percent", "system/gpu0/power_w"} <= keys
    steps = sorted({p["step"] for p in ingest.points() if p["key"] == "system/cpu_percent"})
    assert steps[:3] == [0, 1, 2]


class FakeTensor:
    def __init__(self, norm):
        self._norm = norm

    def detach(self):
        return self

    def norm(self, p):
        assert p == 2
        return SimpleNamespace(item=lambda: self._norm)


class FakeModel:
    """What log_grad_norms needs of a torch.nn.Module: named_parameters() with .grad tensors."""

    def named_parameters(self):
        yield "layer1.weight", SimpleNamespace(grad=FakeTensor(3.0))
        yield "layer1.bias", SimpleNamespace(grad=None)  # frozen / unused: skipped
        yield "layer2.weight", SimpleNamespace(grad=FakeTensor(4.0))


def test_grad_norms_per_layer_and_total(ingest):
    assert grad_norms(FakeModel()) == {"grad_norm/layer1.weight": 3.0, "grad_norm/layer2.weight": 4.0,
                                       "grad_norm/total": 5.0}
    run = _run(ingest.url)
    log_grad_norms(FakeModel(), step=3, run=run)
    run.finish(timeout=10)
    assert {(p["key"], p["step"], p["value"]) for p in ingest.points()} == {
        ("grad_norm/layer1.weight", 3, 3.0), ("grad_norm/layer2.weight", 3, 4.0), ("grad_norm/total", 3, 5.0)}


def test_a_run_prints_which_run_it_is_and_where_to_see_it(ingest):
    """Issue 46, item 14: print(cairn.init(...)) showed `<cairn.tracking.run.Run object at 0x...>`."""
    run = _run(ingest.url, name="mnist")
    text = repr(run)
    assert text == f"<cairn.Run 7 'mnist' project='vision' running: {ingest.url}/projects/vision/compare?runs=7>"
    run.finish(timeout=10)
    assert "finished" in repr(run) and "object at 0x" not in str(run)
    pending = Run(url=ingest.url, project="vision", api_token="t", system_metrics=False)
    assert repr(pending).startswith("<cairn.Run (not created yet) project='vision' running at http://127.0.0.1:")
    pending._finished = True  # nothing to send: no run is created at exit


def test_installing_the_sdk_installs_psutil_for_system_metrics():
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "sdk" / "pyproject.toml").read_text())["project"]
    assert any(dep.split(">")[0].split("=")[0].strip() == "psutil" for dep in project["dependencies"])
