"""Helpers shared by bench/scheduler_*.py: Django setup, timing, and recording figures in
docs/benchmarks.md (only inside the "## Scheduler" section, between per-benchmark markers)."""
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE_DIR = Path(os.environ.get("CAIRN_TRACE_DIR", ROOT.parent / "shared" / "data" / "traces" / "alibaba-gpu-2023"))
DOC = ROOT / "docs" / "benchmarks.md"
FIGURES = ROOT / "docs" / "figures"
SECTION = "## Scheduler"


def setup_path() -> None:
    """Make `apps.scheduling.policy` importable (the policy core needs no Django setup)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


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
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\nFigures measured by the scripts in bench/, with the exact commands.\n"
    begin, end = f"<!-- scheduler:{key}:begin -->", f"<!-- scheduler:{key}:end -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    if SECTION not in text:
        text = text.rstrip() + f"\n\n{SECTION}\n\n" + \
            "Scheduler benchmarks (bench/scheduler_*.py); each block is rewritten by its script.\n"
    start = text.index(SECTION)
    following = re.search(r"^## ", text[start + len(SECTION):], re.M)
    stop = start + len(SECTION) + following.start() if following else len(text)
    section = text[start:stop]
    if begin in section:
        section = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, section, flags=re.S)
    else:
        section = section.rstrip() + "\n\n" + block + "\n"
    text = text[:start] + section.rstrip() + "\n" + ("\n" + text[stop:] if stop < len(text) else "")
    DOC.write_text(text)
