"""apps/core/seams.py against the code and the docs: every seam declared, filled, documented."""

import ast
import importlib
from pathlib import Path

from django.core.management import call_command

from apps.core.seams import DOC_END, DOC_START, SEAMS, seams_markdown

ROOT = Path(__file__).resolve().parents[2]
FILLING_METHODS = {"append", "extend", "add", "update", "setdefault"}


def _fills_in_apps() -> set[tuple[str, str]]:
    """(dotted path of a registry, app label) for every place an app fills another app's
    registry: a name imported from another app that is appended to, updated, assigned into, or
    a `register_*` function of another app that is called."""
    found = set()
    for path in (ROOT / "apps").rglob("*.py"):
        if "migrations" in path.parts:
            continue
        app = path.relative_to(ROOT / "apps").parts[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        imported: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("apps."):
                if node.module.split(".")[1] == app:
                    continue
                for alias in node.names:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in ast.walk(tree):
            target = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in FILLING_METHODS and isinstance(node.func.value, ast.Name):
                target = node.func.value.id
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("register_"):
                target = node.func.id
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                        target = t.value.id
            if target in imported:
                found.add((imported[target], app))
    return found


def test_every_registry_filled_across_apps_is_a_declared_seam():
    declared = {seam.path: seam for seam in SEAMS}
    undeclared = sorted(f"{path} (filled by {app})" for path, app in _fills_in_apps() if path not in declared)
    assert not undeclared, f"Declare these in apps/core/seams.py: {undeclared}"
    wrong_filler = sorted(f"{path} by {app}" for path, app in _fills_in_apps()
                          if path in declared and app not in declared[path].filled_by)
    assert not wrong_filler, f"Filled by an app apps/core/seams.py does not name: {wrong_filler}"


def test_every_declared_filler_fills_its_seam():
    fills = _fills_in_apps()
    missing = sorted(f"{seam.path} by {app}" for seam in SEAMS for app in seam.filled_by
                     if app != seam.offered_by and (seam.path, app) not in fills)
    assert not missing, f"apps/core/seams.py says these fill a seam, but no code does: {missing}"


def test_every_seam_exists_with_its_shape_and_holds_its_fillers_entries():
    for seam in SEAMS:
        registry = getattr(importlib.import_module(seam.module), seam.name)
        if seam.shape == "setter":
            assert callable(registry), seam.path
            continue
        assert isinstance(registry, {"list": list, "dict": dict, "set": set}[seam.shape]), seam.path
        assert registry, f"{seam.path} is empty after start-up"
        entries = registry.values() if isinstance(registry, dict) else registry
        for entry in entries:
            if callable(entry):
                owner = entry.__module__.split(".")[1]
                assert owner in (*seam.filled_by, seam.offered_by), f"{seam.path}: {entry} comes from {owner}"


def test_architecture_doc_carries_the_generated_table():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert DOC_START in doc and DOC_END in doc
    block = doc.split(DOC_START, 1)[1].split(DOC_END, 1)[0].strip()
    assert block == seams_markdown(), "Run `python manage.py seams --write` and commit docs/architecture.md."


def test_seams_command_prints_the_table(capsys):
    call_command("seams")
    assert capsys.readouterr().out.strip() == seams_markdown()
