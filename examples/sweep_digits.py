"""A sweep's trial: a scikit-learn MLP on the digits data set that ships with scikit-learn (no
download), logging validation accuracy after every epoch with the Cairn SDK.

Run by `cairn sweep create examples/sweep_digits.yaml`: each trial gets its parameters in the
environment (PARAM_LR, PARAM_HIDDEN, ..., and all of them as JSON in CAIRN_SWEEP_PARAMS), and
Cairn has already stored them in the trial's run. Outside Cairn it runs with the defaults below
and only prints. bench/sweeps.py imports `train` to compare search algorithms on it.
"""
from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.preprocessing import StandardScaler

DEFAULTS = {"lr": 0.001, "hidden": 64, "alpha": 0.0001, "solver": "adam", "momentum": 0.9, "batch_size": 64}


def data(seed: int = 0):
    digits = load_digits()
    x_train, x_val, y_train, y_val = train_test_split(digits.data, digits.target, test_size=0.25,
                                                      random_state=seed, stratify=digits.target)
    scaler = StandardScaler().fit(x_train)
    return scaler.transform(x_train), scaler.transform(x_val), y_train, y_val


def train(params: dict, *, epochs: int, on_epoch: Callable[[int, float], bool | None] | None = None,
          seed: int = 0) -> float:
    """Train for `epochs` epochs; after each, `on_epoch(epoch, val_acc)` (epochs count from 1;
    returning True stops early). Returns the last validation accuracy."""
    p = {**DEFAULTS, **params}
    x_train, x_val, y_train, y_val = data(seed)
    model = MLPClassifier(hidden_layer_sizes=(int(p["hidden"]),), solver=p["solver"],
                          learning_rate_init=float(p["lr"]), alpha=float(p["alpha"]),
                          momentum=float(p["momentum"]), batch_size=int(p["batch_size"]), random_state=seed)
    classes = np.unique(y_train)
    rng = np.random.default_rng(seed)
    accuracy = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for epoch in range(1, epochs + 1):
            order = rng.permutation(len(y_train))
            model.partial_fit(x_train[order], y_train[order], classes=classes)
            accuracy = float(model.score(x_val, y_val))
            if on_epoch is not None and on_epoch(epoch, accuracy):
                break
    return accuracy


def params_from_env() -> dict:
    """The trial's parameters: CAIRN_SWEEP_PARAMS (typed JSON), else PARAM_* variables, else defaults."""
    if os.environ.get("CAIRN_SWEEP_PARAMS"):
        return json.loads(os.environ["CAIRN_SWEEP_PARAMS"])
    found = {}
    for name, default in DEFAULTS.items():
        value = os.environ.get(f"PARAM_{name.upper()}")
        if value is not None:
            found[name] = type(default)(value)
    return found


def main() -> None:
    epochs = int(os.environ.get("EPOCHS", 30))
    pause = float(os.environ.get("EPOCH_SECONDS", 0))  # to watch a sweep in the dashboard
    params = params_from_env()
    tracking = bool(os.environ.get("CAIRN_RUN_ID"))
    if tracking:
        import cairn

        cairn.init(system_metrics=False)

    def on_epoch(epoch: int, accuracy: float) -> None:
        print(f"epoch {epoch}: val_acc {accuracy:.4f}", flush=True)
        if tracking:
            cairn.log({"val_acc": accuracy}, step=epoch)
        if pause:
            time.sleep(pause)

    print(f"params: {params}", flush=True)
    accuracy = train(params, epochs=epochs, on_epoch=on_epoch)
    print(f"final val_acc {accuracy:.4f}", flush=True)
    if tracking:
        cairn.finish()


if __name__ == "__main__":
    main()
