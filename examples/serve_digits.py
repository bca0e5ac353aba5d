"""Example deployment: a handwritten-digit classifier served over HTTP on $PORT.

At start-up it trains a support-vector classifier on the digits data set that ships with
scikit-learn (1,797 8x8 images; no download), on three quarters of it, and keeps the last
quarter aside. Then it answers:

- `GET /healthz`: 200 once the model is trained (use it as the deployment's readiness path);
- `GET /predict?sample=N`: the prediction for held-out image N, with its true label;
- `POST /predict` with `{"pixels": [[64 numbers 0..16], ...]}`: predictions for your images;
- `GET /`: what the model is and how accurate it is on the held-out images.

    POST /api/v1/projects/<p>/deployments/  {"name": "digits", "command": "python examples/serve_digits.py", "readiness_path": "/healthz"}

Needs scikit-learn (pinned in requirements-dev.txt; `pip install scikit-learn` elsewhere).
`WORK_MS` (default 0) adds that much CPU work per prediction, to make a heavier model for benchmarks.
"""
import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one replica, one core: no thread pool per request
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

started = time.monotonic()
digits = load_digits()
split = len(digits.data) * 3 // 4
model = SVC(gamma=0.001, C=10.0).fit(digits.data[:split], digits.target[:split])
held_out, held_out_labels = digits.data[split:], digits.target[split:]
accuracy = float((model.predict(held_out) == held_out_labels).mean())
INFO = {"model": "SVC(gamma=0.001, C=10) on scikit-learn's digits", "trained_on": split,
        "held_out": len(held_out), "held_out_accuracy": round(accuracy, 4),
        "training_seconds": round(time.monotonic() - started, 3)}
WORK_SECONDS = float(os.environ.get("WORK_MS", "0")) / 1000


def busy() -> None:
    """Burn WORK_MS of CPU (a stand-in for a bigger model)."""
    end = time.perf_counter() + WORK_SECONDS
    while time.perf_counter() < end:
        pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart

    def log_message(self, *args):
        pass

    def answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/healthz":
            self.answer(200, {"ready": True})
        elif url.path == "/predict":
            try:
                sample = int(parse_qs(url.query).get("sample", ["0"])[0])
                image = held_out[sample]
            except (ValueError, IndexError):
                self.answer(400, {"detail": f"sample must be 0..{len(held_out) - 1}"})
                return
            busy()
            self.answer(200, {"sample": sample, "predicted": int(model.predict(image[None, :])[0]),
                              "label": int(held_out_labels[sample])})
        elif url.path == "/":
            self.answer(200, INFO)
        else:
            self.answer(404, {"detail": "Not found: try /predict?sample=0"})

    def do_POST(self):
        if urlsplit(self.path).path != "/predict":
            self.answer(404, {"detail": "Not found: POST /predict"})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            pixels = np.asarray(body["pixels"], dtype=float)
            if pixels.ndim != 2 or pixels.shape[1] != 64:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            self.answer(400, {"detail": 'Send {"pixels": [[64 numbers 0..16], ...]}.'})
            return
        busy()
        self.answer(200, {"predictions": [int(p) for p in model.predict(pixels)]})


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "8080"))
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"digits model trained in {INFO['training_seconds']}s, held-out accuracy {accuracy:.3f}; "
          f"serving on 127.0.0.1:{port}", flush=True)
    server.serve_forever()
