"""cairn.checkpoint: atomic saves, latest(), keep-N, two-stage saves, reports to Cairn, and a save
killed half-way (a real process, SIGKILL) that latest() never returns."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cairn import checkpoint as ckpt


@pytest.fixture
def ckdir(tmp_path, monkeypatch):
    path = tmp_path / "ckpt"
    monkeypatch.setenv("CAIRN_CHECKPOINT_DIR", str(path))
    monkeypatch.setenv("CAIRN_CHECKPOINT_FAST_DIR", str(tmp_path / "fast"))
    for var in ("CAIRN_API_URL", "CAIRN_PROJECT", "CAIRN_RUN_ID", "CAIRN_RUN_TOKEN", "CAIRN_CHECKPOINT_KEEP",
                "CAIRN_CHECKPOINT_TWO_STAGE", "CAIRN_REPLICA"):
        monkeypatch.delenv(var, raising=False)
    return path


def test_latest_is_none_before_any_save(ckdir):
    assert ckpt.latest() is None
    assert ckpt.list_checkpoints() == []


def test_save_then_latest_round_trips_the_state_with_a_manifest(ckdir):
    saved = ckpt.save({"weights": [1.0, 2.0], "step": 7}, step=7)
    assert saved is not None and saved.step == 7
    found = ckpt.latest()
    assert found == saved
    assert found.load() == {"weights": [1.0, 2.0], "step": 7}
    manifest = json.loads((found.path / "manifest.json").read_text())
    assert manifest["step"] == 7 and manifest["size"] == found.state_path.stat().st_size > 0
    assert len(manifest["sha256"]) == 64 and manifest["time"] <= time.time()
    assert found.verify()
    assert not [p for p in ckdir.iterdir() if p.name.startswith(".tmp-")]


def test_bytes_are_saved_as_they_are(ckdir):
    ckpt.save(b"\x00raw", step=1)
    assert ckpt.latest().load() == b"\x00raw"


def test_only_the_last_n_are_kept_and_latest_is_the_highest_step(ckdir):
    for step in (10, 20, 30, 40):
        ckpt.save({"s": step}, step=step, keep=2)
    assert [c.step for c in ckpt.list_checkpoints()] == [30, 40]
    assert ckpt.latest().load() == {"s": 40}


def test_saving_a_step_again_replaces_it(ckdir):
    ckpt.save({"v": 1}, step=5)
    ckpt.save({"v": 2}, step=5)
    assert [c.step for c in ckpt.list_checkpoints()] == [5]
    assert ckpt.latest().load() == {"v": 2}


def test_a_step_folder_with_a_truncated_state_or_no_manifest_is_not_returned(ckdir):
    ckpt.save({"ok": True}, step=1)
    bad = ckpt.save({"ok": False, "pad": "x" * 1000}, step=2)
    with open(bad.state_path, "r+b") as f:  # the disk lost its tail
        f.truncate(10)
    (ckdir / "step-00000003").mkdir()  # a folder with no manifest
    assert ckpt.latest().step == 1


def test_verify_skips_a_checkpoint_whose_checksum_does_not_match(ckdir):
    ckpt.save(b"good", step=1)
    bad = ckpt.save(b"fine", step=2)
    bad.state_path.write_bytes(b"evil")  # same size, other bytes
    assert ckpt.latest().step == 2
    assert ckpt.latest(verify=True).step == 1


def test_bad_steps_are_refused(ckdir):
    for step in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError):
            ckpt.save(b"x", step=step)


def test_two_stage_returns_before_the_flush_and_persists_in_the_background(ckdir, monkeypatch):
    gate = threading.Event()
    real_copy = ckpt._copy_atomic

    def slow_copy(*args, **kwargs):
        gate.wait(10)
        return real_copy(*args, **kwargs)

    monkeypatch.setattr(ckpt, "_copy_atomic", slow_copy)
    assert ckpt.save({"fast": 1}, step=3, two_stage=True) is None
    assert ckpt.latest() is None  # only in the fast tier so far: not yet a checkpoint to resume from
    gate.set()
    assert ckpt.wait(timeout=10)
    assert ckpt.latest().load() == {"fast": 1}
    assert not any((ckdir.parent / "fast").glob("step-*"))  # the fast copy is gone once flushed


class _Recorder(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).received.append((self.path, self.headers.get("Authorization"), body))
        self.send_response(201)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def test_each_checkpoint_is_reported_to_cairn_with_the_run_token(ckdir, monkeypatch):
    _Recorder.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("CAIRN_API_URL", f"http://127.0.0.1:{server.server_port}")
        monkeypatch.setenv("CAIRN_PROJECT", "vision")
        monkeypatch.setenv("CAIRN_RUN_ID", "12")
        monkeypatch.setenv("CAIRN_RUN_TOKEN", "cairnrun_abc_secret")
        monkeypatch.setenv("CAIRN_REPLICA", "1")
        ckpt.save(b"x" * 100, step=4)
        ckpt.save(b"y" * 50, step=8, two_stage=True)
        assert ckpt.wait(timeout=10)
    finally:
        server.shutdown()
    paths = {path for path, _, _ in _Recorder.received}
    assert paths == {"/api/v1/projects/vision/runs/12/checkpoints/"}
    assert {auth for _, auth, _ in _Recorder.received} == {"Bearer cairnrun_abc_secret"}
    bodies = sorted((body for _, _, body in _Recorder.received), key=lambda b: b["step"])
    assert [(b["step"], b["size_bytes"], b["replica"], b["two_stage"]) for b in bodies] == [
        (4, 100, 1, False), (8, 50, 1, True)]
    assert bodies[1]["save_seconds"] >= bodies[1]["blocking_seconds"] >= 0


INTERRUPTED = """
    import os, sys, time, pathlib
    from cairn import checkpoint as ckpt

    class Slow:
        def __reduce__(self):
            pathlib.Path(sys.argv[1]).write_text("writing")  # the save has begun: kill me now
            time.sleep(60)
            return (dict, ())

    ckpt.save({"complete": True}, step=100)
    ckpt.save({"model": [0.0] * 10000, "slow": Slow()}, step=200)
    print("never reached", flush=True)
"""


def test_a_save_killed_half_way_is_never_returned_by_latest(ckdir, tmp_path):
    script = tmp_path / "interrupted.py"
    script.write_text(textwrap.dedent(INTERRUPTED))
    gate = tmp_path / "gate"
    env = {**os.environ, "CAIRN_CHECKPOINT_DIR": str(ckdir)}
    proc = subprocess.Popen([sys.executable, str(script), str(gate)], env=env, stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not gate.exists():
            assert proc.poll() is None, "the script ended before its second save"
            assert time.monotonic() < deadline, "the second save never began"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    leftovers = [p.name for p in ckdir.iterdir() if p.name.startswith(".tmp-")]
    assert leftovers, "the interrupted save left its temporary folder"
    assert [c.step for c in ckpt.list_checkpoints()] == [100]
    assert ckpt.latest().load() == {"complete": True}
    ckpt.save({"after": True}, step=300)  # the next save clears the interrupted one away
    assert not [p for p in ckdir.iterdir() if p.name.startswith(".tmp-")]
    assert ckpt.latest().step == 300
