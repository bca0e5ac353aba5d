"""Example training job: fits a linear model with numpy and prints a decreasing loss.

Runs as any number of replicas; each replica reads the env vars Cairn injects and trains on
its own shard of the data, like a data-parallel job would.
"""
import os
import time

import numpy as np

rank = int(os.environ.get("RANK", 0))
world_size = int(os.environ.get("WORLD_SIZE", 1))
steps = int(os.environ.get("STEPS", 60))
lr = float(os.environ.get("LR", 0.05))

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
    time.sleep(float(os.environ.get("STEP_SECONDS", 0.5)))
print(f"replica {rank}: done, final loss {loss:.6f}", flush=True)
