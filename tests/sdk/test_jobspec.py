import pytest

from cairn.jobspec import JobSpecError, load_job_file, parse_job


def test_training_is_the_default_kind_and_kind_and_project_are_not_posted():
    spec = parse_job("name: mnist\nproject: vision\ncommand: python train.py\n")
    assert spec.kind == "training"
    assert spec.project == "vision"
    assert spec.body == {"name": "mnist", "command": "python train.py"}


def test_env_values_become_text():
    spec = parse_job("kind: training\ncommand: [python, t.py]\nenv: {LR: 0.01, N: 3, DEBUG: true}")
    assert spec.body["env"] == {"LR": "0.01", "N": "3", "DEBUG": "true"}
    assert spec.body["command"] == ["python", "t.py"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("- a\n- b\n", "expected a mapping"),
        ("kind: batch\n", "unknown kind 'batch'"),
        ("name: [unclosed\n", "invalid YAML at line"),
        ("command: {a: 1}\n", "`command` must be a string or a list"),
        ("env: [A]\n", "`env` must be a mapping"),
        ("project: 3\n", "`project` must be a project slug"),
        ("command: x\nstart: 2024-01-01\n", "cannot be sent as JSON"),
    ],
)
def test_obvious_mistakes_are_reported_with_the_file_name(text, message):
    with pytest.raises(JobSpecError, match=message) as info:
        parse_job(text, "job.yaml")
    assert str(info.value).startswith("job.yaml: ")


def test_missing_file(tmp_path):
    with pytest.raises(JobSpecError, match="no such file"):
        load_job_file(str(tmp_path / "nope.yaml"))


def test_directory_is_not_a_job_file(tmp_path):
    with pytest.raises(JobSpecError, match="is a directory"):
        load_job_file(str(tmp_path))
