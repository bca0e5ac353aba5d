"""Example training job: fits a linear model with numpy and prints a decreasing loss.

Runs as any number of replicas; each replica reads the env vars Cairn injects and trains on
its own shard of the data, like a data-parallel job would. Inside a Cairn job (the backend sets
CAIRN_RUN_ID and friends) replica 0 also logs its loss and parameters with the Cairn SDK, so the
dashboard draws the loss curve live; without the SDK, or outside Cairn, it only prints.
"""
import os
import time

import numpy as np

try:
    import cairn
except ImportError:  # the SDK is optional: the script runs anywhere numpy does
    cairn = None

rank = int(os.environ.get("RANK", 0))
world_size = int(os.environ.get("WORLD_SIZE", 1))
steps = int(os.environ.get("STEPS", 60))
lr = float(os.environ.get("LR", 0.05))
step_seconds = float(os.environ.get("STEP_SECONDS", 0.5))

# One run per attempt of the job; the replicas share it, so only replica 0 writes to it.
tracking = cairn is not None and rank == 0 and bool(os.environ.get("CAIRN_RUN_ID"))
if tracking:
    cairn.init()
    cairn.log_params({"lr": lr, "steps": steps, "world_size": world_size, "model": "linear-8"})

rng = np.random.default_rng(seed=42)
true_w = rng.normal(size=8)
x = rng.normal(size=(4096, 8))
y = x @ true_w + 0.01 * rng.normal(size=4096)
shard = slice(rank, None, world_size)
x, y = x[shard], y[shard]

w = np.zeros(8)
print(f"replica {rank}/{world_size}: {len(y)} samples, master {os.environ.get('MASTER_ADDR')}:"
      f"{os.environ.get('MASTER_PORT')}", flush=True)
for step in range(steps):
    error = x @ w - y
    loss = float(np.mean(error**2))
    w -= lr * 2 * x.T @ error / len(y)
    print(f"step {step:4d}  loss {loss:.6f}", flush=True)
    if tracking:
        cairn.log({"loss": loss, "weight_error": float(np.linalg.norm(w - true_w))}, step=step)
    time.sleep(step_seconds)
print(f"replica {rank}: done, final loss {loss:.6f}", flush=True)
if tracking:
    cairn.finish()
