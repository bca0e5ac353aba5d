"""Sweeps: ASHA vs random vs grid search on the digits example, with the same CPU-time budget.

Each algorithm gets `--budget` CPU-seconds of training (time.process_time around every epoch of
examples/sweep_digits.py's `train`) per seed; it asks Optuna for trials until the budget is
spent (a trial still running when it runs out is cut off and not counted). The samplers and the
pruner are the ones Cairn's sweeps build (apps.sweeps.study), in memory instead of on the
database: this measures the search algorithms, not Cairn's driver or scheduler.

Figures: the best validation accuracy each reached, and the CPU-seconds it took to reach 97% (and
99%) of the best accuracy any of them reached on that seed (medians over seeds; a seed on which
one never got there is left out of its median, and "not reached" means none got there). Written to the "Sweeps"
section of docs/benchmarks.md (`--no-record` to only print).

    .venv/bin/python bench/sweeps.py --budget 30 --seeds 3
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples"), str(ROOT / "bench")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

import optuna  # noqa: E402
from benchmarks_doc import write_block  # noqa: E402
from sweep_digits import train  # noqa: E402

from apps.sweeps.models import Sweep  # noqa: E402
from apps.sweeps.space import parse_space, suggest  # noqa: E402
from apps.sweeps.study import pruner, sampler  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

EPOCHS = 27  # ASHA's rungs at epochs 1, 3, 9, 27 (min_resource 1, reduction factor 3)
SPACE = {  # the example's space (examples/sweep_digits.yaml), without the conditional momentum
    "lr": {"type": "float", "low": 1e-4, "high": 0.1, "log": True},
    "hidden": {"type": "int", "low": 8, "high": 256, "log": True},
    "alpha": {"type": "float", "low": 1e-6, "high": 1e-2, "log": True},
    "solver": {"type": "categorical", "choices": ["adam", "sgd"]},
}
GRID = {  # grid search needs values: 5 x 3 x 2 x 2 = 60 points over the same ranges
    "lr": {"type": "categorical", "choices": [0.0003, 0.001, 0.003, 0.01, 0.03]},
    "hidden": {"type": "categorical", "choices": [16, 64, 256]},
    "alpha": {"type": "categorical", "choices": [1e-5, 1e-3]},
    "solver": {"type": "categorical", "choices": ["adam", "sgd"]},
}


class BudgetSpent(Exception):
    pass


class Meter:
    """CPU-seconds of training spent so far, against the budget."""

    def __init__(self, budget: float):
        self.budget, self.spent = budget, 0.0


def run_trial(meter: Meter, trial, params: dict, *, asha: bool) -> tuple[str, float]:
    """Train one trial, reporting each epoch; ("complete" | "pruned" | "budget", accuracy)."""
    outcome = {"state": "complete", "t": time.process_time()}

    def on_epoch(epoch: int, accuracy: float) -> bool:
        meter.spent += time.process_time() - outcome["t"]
        if meter.spent >= meter.budget:
            raise BudgetSpent
        trial.report(accuracy, epoch)
        if asha and trial.should_prune():
            outcome["state"] = "pruned"
            return True
        outcome["t"] = time.process_time()
        return False

    try:
        accuracy = train(params, epochs=EPOCHS, on_epoch=on_epoch, seed=0)
    except BudgetSpent:
        return "budget", 0.0
    return outcome["state"], accuracy


def search(algorithm: str, *, budget: float, seed: int) -> dict:
    """Run one algorithm until `budget` CPU-seconds of training are spent."""
    space = parse_space(GRID if algorithm == "grid" else SPACE)
    sweep = Sweep(algorithm=algorithm, space=space, seed=seed, min_resource=1, reduction_factor=3,
                  direction="maximize")
    study = optuna.create_study(direction="maximize", sampler=sampler(sweep), pruner=pruner(sweep))
    meter, best, timeline, counts = Meter(budget), 0.0, [], {"complete": 0, "pruned": 0}
    while meter.spent < budget and not (algorithm == "grid" and counts["complete"] >= 60):
        trial = study.ask()
        params = suggest(trial, space, grid=algorithm == "grid")
        state, accuracy = run_trial(meter, trial, params, asha=algorithm == "asha")
        if state == "budget":
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            break
        if state == "pruned":
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            counts["pruned"] += 1
            continue
        study.tell(trial, accuracy)
        counts["complete"] += 1
        if accuracy > best:
            best = accuracy
            timeline.append((meter.spent, best))
    return {"best": best, "timeline": timeline, "spent": meter.spent, **counts}


def time_to(timeline: list[tuple[float, float]], target: float) -> float | None:
    return next((t for t, value in timeline if value >= target), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=30.0, help="CPU-seconds of training per algorithm and seed")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="print only; do not edit docs/benchmarks.md")
    args = parser.parse_args()
    algorithms = ("asha", "random", "grid")
    results: dict[str, list[dict]] = {a: [] for a in algorithms}
    started = time.monotonic()
    for seed in range(args.seeds):
        found = {a: search(a, budget=args.budget, seed=seed) for a in algorithms}
        top = max(r["best"] for r in found.values())
        for a, r in found.items():
            r["to97"] = time_to(r["timeline"], 0.97 * top)
            r["to99"] = time_to(r["timeline"], 0.99 * top)
            results[a].append(r)
            print(f"seed {seed} {a:6}: best {r['best']:.4f}, {r['complete']} complete + {r['pruned']} pruned trials, "
                  f"97% of {top:.4f} after {r['to97'] if r['to97'] is None else round(r['to97'], 1)} CPU-s", flush=True)
    wall = time.monotonic() - started

    def median(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    def seconds(value):
        return "not reached" if value is None else f"{value:.1f}"

    lines = ["| algorithm | best val. accuracy (median) | CPU-s to 97% of the seed's best | CPU-s to 99% | trials run "
             "(complete + pruned) |", "|---|---|---|---|---|"]
    for a in algorithms:
        rs = results[a]
        lines.append(f"| {a} | {median([r['best'] for r in rs]):.4f} | {seconds(median([r['to97'] for r in rs]))} | "
                     f"{seconds(median([r['to99'] for r in rs]))} | "
                     f"{median([r['complete'] for r in rs]):g} + {median([r['pruned'] for r in rs]):g} |")
    table = "\n".join(lines)
    print(table)
    command = f"`.venv/bin/python bench/sweeps.py --budget {args.budget:g} --seeds {args.seeds}`"
    body = (f"{table}\n\nSame budget for each: {args.budget:g} CPU-seconds of training per algorithm and seed, "
            f"{args.seeds} seeds, {EPOCHS} epochs a trial; ASHA prunes at epochs 1, 3 and 9 (reduction factor 3). "
            f"Command: {command} ({os.cpu_count()} CPUs shared with other work, Python "
            f"{platform.python_version()}, optuna {optuna.__version__}; {wall / 60:.1f} min wall).")
    if not args.no_record:
        write_block(section="## Sweeps", prefix="sweeps", key="a", block_body=body, intro=(
            "Hyper-parameter search on the digits example (examples/sweep_digits.py, a scikit-learn MLP) with the "
            "samplers and pruner Cairn's sweeps use (bench/sweeps.py): ASHA (random search + successive halving), "
            "random search and grid search, each with the same CPU-time budget, in one run."))


if __name__ == "__main__":
    main()
