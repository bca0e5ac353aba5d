from pathlib import Path

import pytest

from cairn.jobspec import JobSpecError
from cairn.sweepspec import load_sweep_file, parse_sweep

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sweep_digits.yaml"


def test_the_example_is_read_with_its_template_as_a_job():
    spec = load_sweep_file(str(EXAMPLE))
    assert spec.project is None
    body = spec.body
    assert body["name"] == "digits-mlp" and body["algorithm"] == "asha"
    assert body["objective"] == {"metric": "val_acc", "direction": "maximize"}
    assert body["template"]["max_runtime_seconds"] == 600 and "max_runtime" not in body["template"]
    assert body["template"]["env"] == {"EPOCHS": "30"}
    assert body["space"]["momentum"]["when"] == {"solver": "sgd"}


def test_project_is_not_posted():
    spec = parse_sweep("name: s\nproject: vision\ntemplate: {command: [python, t.py, 3]}\n")
    assert spec.project == "vision" and "project" not in spec.body
    assert spec.body["template"]["command"] == ["python", "t.py", "3"]


@pytest.mark.parametrize("text, message", [
    ("- a\n- b\n", "expected a mapping"),
    ("name: s\n", "`template` must be a training job"),
    ("name: s\ntemplate: {command: x, kind: notebook}\n", "trials are training jobs"),
    ("name: s\ntemplate: {command: x, max_runtime: 5}\n", "`max_runtime` must be"),
    ("name: [unclosed\n", "invalid YAML"),
])
def test_mistakes_name_the_file(text, message):
    with pytest.raises(JobSpecError) as raised:
        parse_sweep(text, "sweep.yaml")
    assert message in str(raised.value) and "sweep.yaml" in str(raised.value)
