"""Straggler detection on real per-worker iteration times (Alibaba PAI 2020 minibatch traces).

Replays the traces through Cairn's detector (apps/training/health.py `StragglerDetector`: the
code the reconciler runs, seeing the same last 64 step times per rank) and reports, per case,
when each finding is reported (detection delay, in reported samples: the traces sample every
10th iteration) and the false positives.

Cases:
- the two labelled jobs as recorded (job_1: worker 6 from iteration 1811; job_3: workers 6-9
  slow from iteration 2161; onsets read off the data), every finding listed; with a naive fixed
  threshold for comparison;
- spliced cases, built from the part of each job before its labelled onset (no straggler in it):
  `group` (2-5 workers x1.5-3.5 from the first sample: a slow group, no straggler), `late-4x`
  (5 workers x3.5 from the start, then 2 of them x4 again from a late sample: the group, and those
  two as stragglers from that sample), `job-wide` (every worker x1.3-2 from a sample: a slowdown,
  no straggler), `recovers` (one worker x1.3-3 for 10-30 samples, then as before: a straggler
  from that sample, nothing after). Which workers, factors and samples: drawn from the seed.

Tuning and judging are kept apart: the rule's new parameters (`job_ratio`, and `ratio` again) are
swept on the splices of job_1 with seeds 0-4 only (the labelled jobs must stay at zero false
positives); the figures that judge the rule are the splices of job_3 (seeds 0-9) and of job_1
with seeds 5-9, which no choice looked at.

    .venv/bin/python bench/stragglers.py                      # print, and write docs/benchmarks.md
    .venv/bin/python bench/stragglers.py --traces DIR --no-write
"""
from __future__ import annotations

import argparse
import csv
import random
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from apps.training.health import (  # noqa: E402 - pure module, no Django
    JobSlowdown,
    SlowGroup,
    Straggler,
    StragglerDetector,
    StragglerRule,
)

TRACES = next((base / "shared" / "data" / "traces" / "alibaba-pai-2020-minibatch" for base in (ROOT.parent, ROOT.parent.parent)
               if (base / "shared" / "data" / "traces" / "alibaba-pai-2020-minibatch").is_dir()),
              ROOT.parent / "shared" / "data" / "traces" / "alibaba-pai-2020-minibatch")
LABELS = {  # job -> {worker: first iteration it is a straggler}
    "job_1_norm": {6: 1811},
    "job_3_norm": {6: 2161, 7: 2161, 8: 2161, 9: 2161},
}
KINDS = ("group", "late-4x", "job-wide", "recovers")
TUNING = {("job_1_norm", seed) for seed in range(5)}  # the only splices parameters were chosen on
JUDGING_SEEDS = {"job_1_norm": range(5, 10), "job_3_norm": range(10)}

Samples = list[tuple[int, dict[int, float]]]


def load(path: Path) -> Samples:
    """[(iteration, {worker: batch time})] in iteration order; samples with a zero time (missing) dropped."""
    by_time: dict[int, dict[int, float]] = defaultdict(dict)
    with open(path) as f:
        for row in csv.DictReader(f):
            value = float(row["batch_time_norm"])
            if value > 0:
                by_time[int(row["time"])][int(row["worker"])] = value
    return sorted(by_time.items())


@dataclass
class Case:
    name: str
    job: str
    seed: int | None
    samples: Samples
    stragglers: dict[int, int] = field(default_factory=dict)  # worker -> onset iteration
    group: tuple[int, ...] = ()
    slowdown: int | None = None  # onset iteration
    truth: str = ""


def clean(job: str, samples: Samples) -> Samples:
    """The samples before the job's first labelled onset: no straggler in them."""
    onset = min(LABELS[job].values())
    return [(it, times) for it, times in samples if it < onset]


def splice(kind: str, job: str, base: Samples, seed: int) -> Case:
    rng = random.Random(f"{kind}/{job}/{seed}")
    workers = sorted({w for _, t in base for w in t})
    n = len(base)

    def scaled(factor_of) -> Samples:
        return [(it, {w: v * factor_of(i, w) for w, v in times.items()}) for i, (it, times) in enumerate(base)]

    if kind == "group":
        group = tuple(sorted(rng.sample(workers, rng.randint(2, 5))))
        factor = rng.choice((1.5, 2.5, 3.5))
        return Case(kind, job, seed, scaled(lambda i, w: factor if w in group else 1.0), group=group,
                    truth=f"workers {','.join(map(str, group))} x{factor:g} from the start")
    if kind == "late-4x":
        group = tuple(sorted(rng.sample(workers, 5)))
        late = tuple(sorted(rng.sample(group, 2)))
        start = rng.randint(n // 2, n - 30)
        samples = scaled(lambda i, w: 3.5 * (4.0 if w in late and i >= start else 1.0) if w in group else 1.0)
        onset = base[start][0]
        return Case(kind, job, seed, samples, stragglers={w: onset for w in late}, group=group,
                    truth=f"group {','.join(map(str, group))} x3.5; {','.join(map(str, late))} x4 more from sample {start}")
    if kind == "job-wide":
        start = rng.randint(n // 3, n - 30)
        factor = rng.choice((1.3, 1.5, 2.0))
        return Case(kind, job, seed, scaled(lambda i, w: factor if i >= start else 1.0), slowdown=base[start][0],
                    truth=f"all x{factor:g} from sample {start}")
    if kind == "recovers":
        worker = rng.choice(workers)
        start, length = rng.randint(30, n - 40), rng.randint(10, 30)
        factor = rng.choice((1.3, 1.5, 2.0, 3.0))
        samples = scaled(lambda i, w: factor if w == worker and start <= i < start + length else 1.0)
        return Case(kind, job, seed, samples, stragglers={worker: base[start][0]},
                    truth=f"worker {worker} x{factor:g} for samples {start}-{start + length - 1}")
    raise ValueError(kind)


def replay(samples: Samples, detector) -> list[tuple[int, object]]:
    for iteration, times in samples:
        detector.observe(times, iteration)
    return detector.findings


@dataclass
class Result:
    delays: list[float] = field(default_factory=list)  # samples from each true onset to its report
    expected: int = 0
    false: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)


def judge(case: Case, findings: list[tuple[int, object]]) -> Result:
    index = {it: i for i, (it, _) in enumerate(case.samples)}
    result = Result(expected=len(case.stragglers) + bool(case.group) + (case.slowdown is not None))
    seen: set = set()
    for at, finding in findings:
        if isinstance(finding, Straggler):
            onset = case.stragglers.get(finding.replica)
            if onset is None or at < onset:
                result.false.append(f"straggler w{finding.replica}@{at}")
            else:
                result.delays.append(index[at] - index[onset])
                seen.add(("s", finding.replica))
        elif isinstance(finding, SlowGroup):
            if finding.ranks == case.group:
                result.delays.append(index[at])  # from the first sample
                seen.add(("g",))
            else:
                result.false.append(f"group {','.join(map(str, finding.ranks))}@{at}")
        elif isinstance(finding, JobSlowdown):
            if case.slowdown is None or at < case.slowdown:
                result.false.append(f"slowdown@{at}")
            else:
                result.delays.append(index[at] - index[case.slowdown])
                seen.add(("j",))
    result.missed = ([f"straggler w{w}" for w in case.stragglers if ("s", w) not in seen]
                     + (["group"] if case.group and ("g",) not in seen else [])
                     + (["slowdown"] if case.slowdown is not None and ("j",) not in seen else []))
    return result


def short(finding) -> str:
    if isinstance(finding, Straggler):
        return f"straggler w{finding.replica} ({finding.ratio:.2f}x peers)"
    if isinstance(finding, SlowGroup):
        return f"group {','.join(map(str, finding.ranks))} ({finding.ratio:.2f}x)"
    return f"slowdown ({finding.ratio:.2f}x)"


class FixedThreshold:
    """The naive rule: a worker is slow when one sample exceeds `factor` x the job's median
    sample time over its first `warmup` samples (fixed at start)."""

    def __init__(self, factor: float, warmup: int = 10):
        self.factor, self.warmup, self.seen, self.threshold, self.findings = factor, warmup, [], None, []
        self.flagged: set[int] = set()

    def observe(self, times: dict[int, float], iteration: int) -> None:
        if self.threshold is None:
            self.seen.extend(times.values())
            if len(self.seen) >= self.warmup * len(times):
                self.threshold = self.factor * statistics.median(self.seen)
            return
        for w, t in times.items():
            if t > self.threshold and w not in self.flagged:
                self.flagged.add(w)
                self.findings.append((iteration, Straggler(replica=w, slow_steps=1, window=1, ratio=0.0)))


def describe(result: Result) -> str:
    found = result.expected - len(result.missed)
    delays = (f"delay {', '.join(f'{d:g}' for d in result.delays)} samples" if result.delays else "delay -")
    return (f"{found}/{result.expected} found, {delays}; false positives {len(result.false)}"
            + (f" ({'; '.join(result.false)})" if result.false else "")
            + (f"; missed {', '.join(result.missed)}" if result.missed else ""))


def cases_of(jobs: dict[str, Samples], seeds: dict[str, range]) -> list[Case]:
    return [splice(kind, job, clean(job, jobs[job]), seed) for kind in KINDS for job in seeds if job in jobs
            for seed in seeds[job]]


def totals(cases: list[Case], rule: StragglerRule) -> dict[str, tuple[int, int, list[float], int]]:
    """kind -> (found, expected, delays, false positives)."""
    out: dict[str, tuple[int, int, list[float], int]] = {}
    for case in cases:
        result = judge(case, replay(case.samples, StragglerDetector(rule)))
        found, expected, delays, false = out.get(case.name, (0, 0, [], 0))
        out[case.name] = (found + result.expected - len(result.missed), expected + result.expected,
                          delays + result.delays, false + len(result.false))
    return out


def summary(stats: tuple[int, int, list[float], int]) -> str:
    found, expected, delays, false = stats
    delay = f"{statistics.median(delays):g} / {max(delays):g}" if delays else "-"
    return f"{found}/{expected} | {delay} | {false}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=Path, default=TRACES)
    parser.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.md")
    args = parser.parse_args()
    jobs = {path.stem: load(path) for path in sorted(args.traces.glob("*.csv"))}
    if not jobs:
        sys.exit(f"no traces in {args.traces}")
    rule = StragglerRule()

    recorded = ["| job | trace | detector | result | findings (iteration: finding) |", "|---|---|---|---|---|"]
    for job, samples in jobs.items():
        workers = len({w for _, t in samples for w in t})
        case = Case("recorded", job, None, samples, stragglers=LABELS.get(job, {}))
        findings = replay(samples, StragglerDetector(rule))
        listed = ", ".join(f"{at}: {short(f)}" for at, f in findings) or "none"
        result = describe(judge(case, findings)) if job in LABELS else "unlabelled"
        recorded.append(f"| {job} | {len(samples)} samples x {workers} workers | Cairn (default rule) | {result} | "
                        f"{listed} |")
        if job in LABELS:
            for factor in (1.2, 1.5):
                fixed = judge(case, replay(samples, FixedThreshold(factor)))
                recorded.append(f"| {job} | | fixed threshold {factor}x start median | {describe(fixed)} | |")

    labelled = [job for job in jobs if job in LABELS]
    judging = cases_of(jobs, {job: JUDGING_SEEDS[job] for job in labelled})
    tuning = cases_of(jobs, {job: range(5) for job, _ in sorted(TUNING) if job in labelled})
    per_case = ["| case | base | seed | spliced | result | findings (iteration: finding) |", "|---|---|---|---|---|---|"]
    for case in judging:
        findings = replay(case.samples, StragglerDetector(rule))
        listed = ", ".join(f"{at}: {short(f)}" for at, f in findings) or "none"
        per_case.append(f"| {case.name} | {case.job} | {case.seed} | {case.truth} | {describe(judge(case, findings))} | "
                        f"{listed} |")
    judged = totals(judging, rule)
    by_kind = ["| case | found | delay median / max (samples) | false positives |", "|---|---|---|---|"]
    by_kind += [f"| {kind} | {summary(judged[kind])} |" for kind in KINDS if kind in judged]

    sweep = ["| job_ratio | ratio | " + " | ".join(f"{k}: found, delay, FP" for k in KINDS)
             + " | labelled jobs: found, FP |", "|---|---|" + "---|" * (len(KINDS) + 1)]
    for job_ratio in (1.15, 1.25, 1.5):
        for ratio in (1.1, 1.15, 1.2):
            candidate = StragglerRule(ratio=ratio, job_ratio=job_ratio)
            stats = totals(tuning, candidate)
            found = expected = false = 0
            for job in labelled:
                result = judge(Case("recorded", job, None, jobs[job], stragglers=LABELS[job]),
                               replay(jobs[job], StragglerDetector(candidate)))
                found, expected = found + result.expected - len(result.missed), expected + result.expected
                false += len(result.false)
            mark = " **default**" if candidate == rule else ""
            sweep.append(f"| {job_ratio}{mark} | {ratio} | "
                         + " | ".join(summary(stats[k]).replace(" | ", ", ") for k in KINDS if k in stats)
                         + f" | {found}/{expected}, {false} |")

    body = "\n".join([
        f"Default rule: ratio {rule.ratio}, z {rule.z}, window {rule.window}, min slow {rule.min_slow}, "
        f"spread floor {rule.floor}, tolerance {rule.tolerance}, history {rule.history}, min delta {rule.min_delta}, "
        f"job ratio {rule.job_ratio} (apps/training/health.py `StragglerRule`); the replay keeps the last 64 step "
        "times per rank, as the reconciler does. Delays in reported samples (x10 iterations); a slow group's from the "
        "first sample.", "",
        "**The recorded jobs** (labels: job_1 worker 6 from iteration 1811, job_3 workers 6-9 from 2161):", "",
        *recorded, "",
        f"**Spliced cases, judging set** (job_3 seeds 0-9, job_1 seeds 5-9: {len(judging)} cases no parameter was "
        "chosen on), per kind:", "", *by_kind, "",
        "Per case:", "", *per_case, "",
        "**Tuning set** (job_1 seeds 0-4 only): the sweep `job_ratio` and `ratio` were chosen on; the other "
        "parameters are the previous defaults, chosen on the two recorded jobs (their sweep is in git history). "
        "Each cell: found/expected, delay median / max, false positives.", "", *sweep, "",
        "Which choices were made on which cases: `ratio`, `z`, `window`, `min_slow`, `floor`, `tolerance`, "
        "`history` and `min_delta` were chosen earlier on the two recorded jobs, so those two rows are no test of "
        "them; `job_ratio` 1.25 and `ratio` 1.15 (kept) on the tuning set above: `ratio` 1.1 flags healthy workers "
        "(in recovers and job-wide splices, and job_1's worker 1), 1.2 leaves one worker of a x1.5 group out of it "
        "(slow at too few of the first samples), `job_ratio` 1.5 misses a x1.3 slowdown, 1.15 and 1.25 tie "
        "(1.25 kept as the margin against the ~10 % drift of job_1's workers over its run). The reference (the "
        "first `window` steps) and grouping by that gap were designed on the synthetic unit tests "
        "(tests/training/test_health.py), not on traces. The judging set shares job_1's trace with the tuning set "
        "(other draws); job_3's splices are held out from every new choice.",
        "",
        "Reading: a group slow from the start (x1.5 to x3.5, 2 to 5 of 10 workers) is reported once as a group "
        "when the first 10 samples are in, never as stragglers, so `evict` has nothing to evict; the rule before "
        "this one flagged such a group from its 4th sample for the whole run. Two workers of a x3.5 group turning "
        "4x slower again are reported 4 samples after the onset, as stragglers of that group; a job-wide x1.3-x2 "
        "slowdown is one finding, no straggler; a worker slowed x1.3-x3 for 10-30 samples is reported once, 4 "
        "samples in, and nothing after it recovers. The recorded jobs keep zero false positives, job_1's straggler "
        "is found as soon as before (5 samples) and job_3's sooner (median 10 samples, was 19), because each worker "
        "is judged against its own usual time rather than its peers' clamped at 1.1x. Not covered: the public job "
        "the issue describes is not in the repository (its 3.5x half-gang split is what `late-4x` splices); "
        "splices scale real noise, where real co-location may add its own; a worker that straggles twice in one "
        "attempt is reported once. A fixed threshold would have to be chosen per job: 1.2x the start median flags "
        "workers of both recorded jobs that are always ~10 % slower, 1.5x misses job_3's stragglers.",
        ])
    print(body)
    if not args.no_write:
        from benchmarks_doc import write_block

        write_block(section="## Training resilience", prefix="resilience", key="stragglers",
                    intro="Hang and straggler detection, gang restarts from checkpoints (docs/training.md).",
                    block_body="### a. Straggler detection on the Alibaba PAI traces\n\n"
                               "`.venv/bin/python bench/stragglers.py`\n\n" + body)


if __name__ == "__main__":
    main()
