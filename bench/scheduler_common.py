"""Helpers shared by bench/scheduler_*.py: Django setup, timing, and recording figures in
docs/benchmarks.md (only inside the "## Scheduler" section, between per-benchmark markers)."""
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks_doc import write_block

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
FIGURES = ROOT / "docs" / "figures"
SECTION = "## Scheduler"


def setup_path() -> None:
    """Make `apps.scheduling.policy` importable (the policy core needs no Django setup)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


setup_path()
from apps.scheduling.simulation import ALIBABA_TRACE_DIR  # noqa: E402 (needs the path above)

TRACE_DIR = ALIBABA_TRACE_DIR


def timed(fn, repeat: int) -> tuple[list[float], object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def median(values) -> float:
    return statistics.median(values)


def command_line() -> str:
    return "python " + " ".join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])


def machine() -> str:
    return f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}"


def record(key: str, body: str) -> None:
    """Replace (or add) the block of benchmark `key` inside the Scheduler section of docs/benchmarks.md."""
    write_block(section=SECTION, prefix="scheduler", key=key, block_body=body, doc=DOC,
                intro="Scheduler benchmarks (bench/scheduler_*.py); each block is rewritten by its script.")
