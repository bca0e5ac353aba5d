"""`Workload.runtime` is the backend's JSON; every app outside the backends reads it through the
typed view apps/workloads/runtime.py (Runtime), which keeps the keys it does not know."""
import re
from pathlib import Path

from apps.workloads.runtime import Runtime

APPS = Path(__file__).resolve().parents[2] / "apps"
# Indexing the JSON directly: runtime[...], runtime.get(...), runtime.items(), (x.runtime or {}).get(...),
# "key" in runtime, and the isinstance(x.runtime, dict) guards that go with them.
DIRECT = re.compile(r"runtime(\s+or\s+\{\}\))?\s*(\[|\.get\(|\.items\(|\.keys\(|\.values\()"
                    r"""|["']\w+["']\s+(not\s+)?in\s+([a-z_]\w*\.)?runtime\b(?!\.)|isinstance\((\w+\.)?runtime,""")


def test_no_module_outside_the_backends_indexes_runtime_directly():
    offenders = []
    for path in sorted(APPS.rglob("*.py")):
        relative = path.relative_to(APPS).as_posix()
        if relative.startswith("backends/") or "/migrations/" in relative or relative == "workloads/runtime.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if DIRECT.search(code) and "max_runtime" not in code:
                offenders.append(f"apps/{relative}:{number}: {line.strip()}")
    assert offenders == [], "read Workload.runtime through apps.workloads.runtime.Runtime:\n" + "\n".join(offenders)


def test_the_grep_finds_what_it_forbids():
    for line in ('url = workload.runtime.get("url")', 'x = (workload.runtime or {}).get("alive")',
                 'runtime["replicas"] = []', 'if "main_rollout" in runtime:', "isinstance(obj.runtime, dict)"):
        assert DIRECT.search(line), line
    for line in ("url = Runtime.of(workload).url", "for r in runtime.replicas:",
                 "a notebook's token in Workload.runtime)"):
        assert not DIRECT.search(line), line


def test_typed_facts_with_defaults_for_what_is_missing_or_malformed():
    runtime = Runtime.from_json({
        "backend": "kubernetes", "attempt": 3, "alive": True, "url": "http://svc", "stragglers": [1, "x", 4],
        "replicas": [{"replica": 0, "ready": True}, "junk"], "ignored_env": ["CAIRN_RUN_ID"],
        "main_rollout": {"ready": 2}, "canary": {}, "clock_awaits_pods": True,
    })
    assert (runtime.backend, runtime.attempt, runtime.alive, runtime.url) == ("kubernetes", 3, True, "http://svc")
    assert runtime.stragglers == {1, 4}
    assert runtime.replicas == ({"replica": 0, "ready": True},)
    assert runtime.ignored_env == ["CAIRN_RUN_ID"]
    assert runtime.main_rollout == {"ready": 2} and runtime.canary is None  # an empty canary is none
    assert runtime.clock_awaits_pods is True

    empty = Runtime.from_json(None)
    assert (empty.backend, empty.attempt, empty.alive, empty.url, empty.sealed_token) == ("", None, None, "", "")
    assert empty.replicas == () and empty.stragglers == frozenset() and empty.main_rollout is None
    assert Runtime.from_json({"attempt": True, "alive": "yes", "url": 7}).attempt is None
    assert Runtime.from_json({"alive": "yes"}).alive is None


def test_writes_keep_the_keys_the_view_does_not_know():
    stored = {"backend": "slurm", "job": 1234, "pids": [1, 2], "alive": True}
    runtime = Runtime.from_json(stored)
    assert runtime.replace(alive=False).to_json() == {**stored, "alive": False}
    assert runtime.without("pids").to_json() == {"backend": "slurm", "job": 1234, "alive": True}
    assert runtime.to_json() == stored and runtime.to_json() is not stored
    assert runtime.only(("backend", "job", "token")) == {"backend": "slurm", "job": 1234}
    stored["alive"] = False
    assert runtime.alive is True  # a copy, not a view of the caller's dict
