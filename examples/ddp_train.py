"""Distributed training example: PyTorch DDP (gloo, CPU) with Cairn checkpoints and progress.

Run it as a Cairn training job with 2+ replicas (the backend sets MASTER_ADDR, MASTER_PORT,
RANK, WORLD_SIZE and the CAIRN_* variables):

    cairn submit --name ddp --replicas 2 --max-restarts 3 -- python examples/ddp_train.py

Every rank reports its step to Cairn (`cairn.progress`, batched with the metrics), rank 0 logs
the loss and saves a checkpoint every CHECKPOINT_EVERY steps (`cairn.checkpoint.save`). On a
start, every rank resumes from `cairn.checkpoint.latest()`: after a crash, a hang or an eviction
the job continues from the last checkpointed step, not from step 0.

Settings (env): STEPS (default 200), STEP_SECONDS (sleep per step, default 0.05),
CHECKPOINT_EVERY (default 10; 0: never), HIDDEN (model width, default 64), TWO_STAGE (1: save
to the fast tier and flush in the background).
Fault injection, for the tests and benchmarks: SLOW_NODE + SLOW_SECONDS (a rank placed on that
node sleeps that much more each step: a straggler), SLOW_RANK (the same for one rank, whatever its node).
"""
from __future__ import annotations

import datetime
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import cairn
from cairn import checkpoint

STEPS = int(os.environ.get("STEPS", 200))
STEP_SECONDS = float(os.environ.get("STEP_SECONDS", 0.05))
CHECKPOINT_EVERY = int(os.environ.get("CHECKPOINT_EVERY", 10))
HIDDEN = int(os.environ.get("HIDDEN", 64))
TWO_STAGE = os.environ.get("TWO_STAGE", "") == "1"


def slow_seconds(rank: int) -> float:
    extra = float(os.environ.get("SLOW_SECONDS", 0) or 0)
    on_slow_node = os.environ.get("SLOW_NODE") and os.environ.get("SLOW_NODE") == os.environ.get("CAIRN_NODE")
    slow_rank = os.environ.get("SLOW_RANK") not in (None, "") and int(os.environ["SLOW_RANK"]) == rank
    return extra if on_slow_node or slow_rank else 0.0


def main() -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = os.environ.get("CAIRN_ATTEMPT", "?")
    tracking = bool(os.environ.get("CAIRN_RUN_ID"))
    if tracking:  # every rank reports progress; rank 0 logs the metrics and params
        cairn.init(system_metrics=rank == 0)
        if rank == 0:
            cairn.log_params({"world_size": world, "hidden": HIDDEN, "steps": STEPS, "attempt": attempt})

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    last = checkpoint.latest()
    if last is not None:
        state = last.load()
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"] + 1
    ddp = DistributedDataParallel(model)
    print(f"rank {rank}/{world} attempt {attempt}: starting at step {start}"
          f"{f' from checkpoint {last.path.name}' if last else ''}", flush=True)

    generator = torch.Generator().manual_seed(1234)
    true_w = torch.randn(16, 1, generator=generator)
    extra = slow_seconds(rank)
    mean_loss = float("nan")
    for step in range(start, STEPS):
        began = time.perf_counter()
        batch = torch.Generator().manual_seed(step * world + rank)
        x = torch.randn(32, 16, generator=batch)
        y = torch.sin(x @ true_w)
        time.sleep(STEP_SECONDS + extra)  # stands for data loading and compute (slower on a slow node)
        loss = nn.functional.mse_loss(ddp(x), y)
        work = time.perf_counter() - began  # this rank's own work, before it waits for the others
        optimizer.zero_grad()
        loss.backward()  # all-reduce of the gradients: every rank waits for the slowest
        optimizer.step()
        reduced = loss.detach().clone()
        dist.all_reduce(reduced)
        mean_loss = reduced.item() / world
        if tracking:  # every rank: its step and its own work time (straggler detection)
            cairn.progress(step, seconds=work)
            if rank == 0:
                cairn.log({"loss": mean_loss}, step=step)
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {mean_loss:.5f}", flush=True)
        if rank == 0 and CHECKPOINT_EVERY and (step + 1) % CHECKPOINT_EVERY == 0:
            checkpoint.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                            step=step, two_stage=TWO_STAGE)
    print(f"rank {rank}: training done, finishing", flush=True)  # output: a quiet shutdown is no hang
    checkpoint.wait()
    if tracking:
        cairn.finish()  # says this rank is done: its shutdown below is not taken for a hang
    dist.barrier()
    print(f"rank {rank}: done at step {STEPS - 1}, loss {mean_loss:.5f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
