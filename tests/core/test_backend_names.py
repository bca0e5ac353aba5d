"""One declared contract per backend (issue 43): outside apps/backends, code asks a backend's
BackendSpec (apps/clusters/backends.py) for what it can do, and never tests a backend's name nor
probes a backend object with hasattr. This test reads the source of every app to hold that."""
import re
from pathlib import Path

from apps.clusters.backends import backend_specs

ROOT = Path(__file__).resolve().parents[2]


def _violations(text: str, names: list[str]) -> list[str]:
    name = "|".join(re.escape(n) for n in names)
    literal = rf"""(?:["'](?:{name})["']|Backend\.[A-Z_]+\b)"""
    patterns = {
        "compares with a backend name": rf"(?:==|!=)\s*{literal}|{literal}\s*(?:==|!=)",
        "tests membership in backend names": rf"\bin\s*[\(\[\{{]\s*{literal}",
        "filters on a backend name": rf"backend(?:__\w+)?\s*=\s*{literal}",
        "probes a backend with hasattr": r"hasattr\(\s*[\w.]*backend",
    }
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        for what, pattern in patterns.items():
            if re.search(pattern, code):
                found.append(f"{number}: {what}: {line.strip()}")
    return found


def _app_sources():
    for path in sorted((ROOT / "apps").rglob("*.py")):
        parts = path.relative_to(ROOT / "apps").parts
        if parts[0] == "backends" or "migrations" in parts:
            continue
        yield path


def test_no_backend_name_is_tested_outside_the_backends():
    names = [spec.name for spec in backend_specs()]
    assert {"local", "kubernetes"} <= set(names)
    found = []
    for path in _app_sources():
        text = path.read_text()
        # Creating a cluster of a backend is not testing one: `backend=Backend.X` as an argument.
        text = re.sub(r"\b(backend|\"backend\"):?\s*=?\s*Backend\.[A-Z_]+\s*[,)}]", "<argument>", text)
        found += [f"{path.relative_to(ROOT)}:{v}" for v in _violations(text, names)]
    assert not found, "Ask the backend's spec (apps.clusters.backends.backend_spec) instead:\n" + "\n".join(found)


def test_hasattr_is_never_asked_of_a_backend():
    found = []
    for path in sorted((ROOT / "apps").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"hasattr\(\s*[\w.]*backend", line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "Declare a capability (apps/backends/base.py) instead:\n" + "\n".join(found)


def test_the_check_finds_what_it_forbids():
    names = ["local", "kubernetes", "slurm"]
    for line in ['if runtime.get("backend") == "kubernetes":', "if pool.cluster.backend == Backend.KUBERNETES:",
                 'nodes.filter(cluster__backend="local")', 'if "slurm" != cluster.backend:',
                 'if hasattr(backend, "launch_replica"):', "if cluster.backend in (Backend.LOCAL, x):"]:
        assert _violations(line, names), line
    for line in ['if backend_spec(cluster.backend).container_workdir:', 'kind = "local"',
                 "cluster.backend != backend"]:
        assert not _violations(line, names), line
