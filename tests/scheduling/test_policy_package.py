"""The policy package's shape: pure (no Django, no ORM, no I/O), its modules layered one way, and
its interface (`apps.scheduling.policy`) the names the rest of the code imports."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import apps.scheduling.policy as policy

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "apps" / "scheduling" / "policy"
# Bottom first: a module may import only from the modules before it (the package's docstring
# says what each holds). A new module takes its place here.
LAYERS = [
    "snapshot", "accelerators", "pinning", "locality", "quota", "placement", "cluster", "state",
    "ordering", "preemption", "backfill", "reasons", "cycle", "__init__",
]
# The standard library the policy may use: computation only, nothing that touches files,
# processes, the network, the clock or the environment.
PURE_STDLIB = {"__future__", "collections", "dataclasses", "datetime", "heapq", "math", "operator", "typing"}
IMPURE_CALLS = {"open", "print", "input", "eval", "exec", "__import__", "breakpoint"}


def _modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), filename=str(p)) for p in sorted(PACKAGE.glob("*.py"))}


def test_every_module_has_its_place_in_the_layers():
    assert sorted(_modules()) == sorted(LAYERS)
    assert not [p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"]


def test_modules_import_only_pure_stdlib_and_the_modules_below_them():
    problems = []
    for name, tree in _modules().items():
        below = set(LAYERS[:LAYERS.index(name)])
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                problems += [f"{name}: import {a.name}" for a in node.names if a.name.split(".")[0] not in PURE_STDLIB]
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0:
                    if node.module.split(".")[0] not in PURE_STDLIB:
                        problems.append(f"{name}: from {node.module} import ...")
                elif node.level != 1 or node.module not in below:
                    problems.append(f"{name}: from {'.' * node.level}{node.module or ''} import ... (not a module below it)")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in IMPURE_CALLS:
                problems.append(f"{name}:{node.lineno}: calls {node.func.id}()")
    assert problems == []


def test_importing_the_package_loads_no_django_and_nothing_outside_the_standard_library():
    # A fresh interpreter: this test process has Django loaded already.
    script = (
        "import json, pkgutil, sys\n"
        "before = set(sys.modules)\n"
        "import apps.scheduling.policy as p\n"
        "for m in pkgutil.iter_modules(p.__path__):\n"
        "    __import__(f'apps.scheduling.policy.{m.name}')\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    assert "apps.scheduling.policy.cycle" in loaded
    outside = [m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names
               and m not in ("apps", "apps.scheduling") and not m.startswith("apps.scheduling.policy")]
    assert outside == []
    assert not [m for m in loaded if m.split(".")[0] in ("django", "rest_framework", "channels", "celery")]


def _imported_from_policy(tree: ast.Module, path: Path) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        absolute = node.level == 0 and node.module == "apps.scheduling.policy"
        relative = (node.level == 1 and node.module == "policy" and path.parent.name == "scheduling"
                    and path.parent.parent.name == "apps")
        if absolute or relative:
            names |= {a.name for a in node.names}
    return names


def test_the_package_exports_every_name_the_code_imports_from_it():
    used = set()
    for folder in ("apps", "bench", "config", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if PACKAGE in path.parents or "migrations" in path.parts:
                continue
            used |= _imported_from_policy(ast.parse(path.read_text(), filename=str(path)), path)
    assert {"schedule", "Snapshot", "PolicyOptions", "Pool", "WAIT_KIND_LABELS"} <= used  # the scan finds them
    assert used <= set(policy.__all__)
    assert all(hasattr(policy, name) for name in policy.__all__)
    assert policy.schedule.__module__ == "apps.scheduling.policy.cycle"
