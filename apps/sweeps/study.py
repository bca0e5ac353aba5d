"""Optuna, on Cairn's own database: the storage, and each sweep's study, sampler and pruner.

Search algorithms are Optuna's (ask-and-tell): Cairn only decides when to ask, what to report
and when to tell. The RDB storage keeps Optuna's tables (studies, trials, trial_params,
trial_intermediate_values, ...) in the database Django uses, through SQLAlchemy: PostgreSQL in
server mode and in tests, the SQLite file in embedded mode.
"""
from __future__ import annotations

import threading
import warnings

import optuna
from django.conf import settings
from django.core.cache import cache
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from .choices import Algorithm, Direction
from .models import Sweep
from .space import grid_search_space

optuna.logging.set_verbosity(optuna.logging.WARNING)

_lock = threading.Lock()
_storages: dict[str, optuna.storages.RDBStorage] = {}


def storage_url() -> str:
    """The SQLAlchemy URL of Django's default database."""
    db = settings.DATABASES["default"]
    engine = db["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    if engine in ("django.db.backends.postgresql", "django.contrib.gis.db.backends.postgis"):
        url = URL.create("postgresql+psycopg", username=db.get("USER") or None, password=db.get("PASSWORD") or None,
                         host=db.get("HOST") or None, port=int(db["PORT"]) if db.get("PORT") else None,
                         database=db["NAME"])
        return url.render_as_string(hide_password=False)
    raise RuntimeError(f"Sweeps need PostgreSQL or SQLite; the database engine is {engine}.")


def storage() -> optuna.storages.RDBStorage:
    """One storage per database URL and process. No connection pool: each operation opens and
    closes its connection, so no session outlives its use (a test database can be dropped)."""
    url = storage_url()
    with _lock:
        found = _storages.get(url)
        if found is None:
            kwargs: dict = {"poolclass": NullPool}
            if url.startswith("sqlite"):
                kwargs["connect_args"] = {"timeout": 30}
            found = optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
            _storages[url] = found
        return found


def sampler(sweep: Sweep, *, asked: int = 0) -> optuna.samplers.BaseSampler:
    """A new sampler for one pass of the driver. Its seed moves on with the trials asked so far
    (`asked`): a sampler made afresh with the same seed would draw the same parameters again, and
    this way a sweep with a seed draws the same sequence after a restart too. Grid search keeps
    its seed (it only picks among the grid points no trial has taken)."""
    if sweep.algorithm == Algorithm.GRID:
        return optuna.samplers.GridSampler(grid_search_space(sweep.space), seed=sweep.seed)
    seed = None if sweep.seed is None else sweep.seed + asked
    if sweep.algorithm == Algorithm.TPE:
        return optuna.samplers.TPESampler(seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)


def pruner(sweep: Sweep) -> optuna.pruners.BasePruner:
    if sweep.algorithm == Algorithm.ASHA:
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=sweep.min_resource,
                                                      reduction_factor=sweep.reduction_factor)
    return optuna.pruners.NopPruner()


def study(sweep: Sweep, *, asked: int = 0) -> optuna.Study:
    """The sweep's study, made on first use (the samplers keep no state Cairn must restore:
    Optuna reads the trials back from the storage)."""
    direction = "maximize" if sweep.direction == Direction.MAXIMIZE else "minimize"
    return optuna.create_study(storage=storage(), study_name=sweep.study_name, direction=direction,
                               sampler=sampler(sweep, asked=asked), pruner=pruner(sweep), load_if_exists=True)


def study_delete(study_name: str) -> None:
    """Remove a study and everything Optuna keeps of it; a study that is not there is no error."""
    try:
        optuna.delete_study(study_name=study_name, storage=storage())
    except KeyError:
        pass


def param_importances(sweep: Sweep, *, completed: int | None = None) -> dict[str, float]:
    """param_importances_compute, kept in Django's cache per sweep and number of completed trials
    (the dashboard asks again every few seconds; the first call in a process also imports
    Optuna's estimators, seconds on a busy machine)."""
    if completed is None:
        return param_importances_compute(sweep)
    key = f"sweeps:importance:{sweep.study_name}:{completed}"
    found = cache.get(key)
    if found is None:
        found = param_importances_compute(sweep)
        cache.set(key, found, 3600)
    return found


def param_importances_compute(sweep: Sweep) -> dict[str, float]:
    """Optuna's parameter importance (`get_param_importances` with its default evaluator,
    PED-ANOVA in Optuna 5) over the completed trials; {} with fewer than two or when every
    completed trial has the same objective."""
    try:
        found = optuna.load_study(study_name=sweep.study_name, storage=storage())
    except KeyError:
        return {}
    complete = [t for t in found.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))]
    if len(complete) < 2 or len({t.value for t in complete}) < 2:
        return {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "few trials in some regimes": said in the docs
            return {k: float(v) for k, v in optuna.importance.get_param_importances(found).items()}
    except (RuntimeError, ValueError):  # e.g. a parameter with one value only in completed trials
        return {}
    except KeyError:  # the sweep was deleted while this ran: its study's rows went from under it
        return {}
