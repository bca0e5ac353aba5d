import pytest

from cairn.jobspec import JobSpecError, load_job_file, parse_duration, parse_job


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
        ("kind: 3\n", "`kind` must be the name of a workload kind"),
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


@pytest.mark.parametrize(("text", "seconds"), [
    ("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("1H 30M", 5400), ("1.5h", 5400), ("45s", 45), ("1d", 86400),
    ("1d12h", 129600), ("2:30:00", 9000), ("0:01:00", 60),
])
def test_durations_are_read_into_seconds(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "message"), [
    ("120", "'120' has no unit: write 120s, 120m or 120h"),
    ("soon", "expected a duration like 90m, 2h, 1h30m, 1d or H:MM:SS, got 'soon'"),
    ("", "expected a duration"),
    ("2h2h", "expected a duration"),
    ("30m2h", "expected a duration"),
    ("-2h", "expected a duration"),
    ("1:75:00", "expected a duration"),
    ("0.5s", "is not a whole number of seconds"),
])
def test_bad_durations_say_what_is_expected(text, message):
    with pytest.raises(ValueError, match=message):
        parse_duration(text)


def test_max_runtime_in_a_job_file_is_sent_in_seconds():
    spec = parse_job("command: python train.py\nmax_runtime: 1h30m\n")
    assert spec.body == {"command": "python train.py", "max_runtime_seconds": 5400}
    raw = parse_job("command: x\nmax_runtime_seconds: 600\n")
    assert raw.body["max_runtime_seconds"] == 600  # the API's own field passes as it is


@pytest.mark.parametrize(("text", "message"), [
    ("max_runtime: 7200\n", "`max_runtime` must be a duration like 90m, 2h, 1h30m, 1d or H:MM:SS"),
    ("max_runtime: soon\n", "`max_runtime`: expected a duration like"),
    ("max_runtime: 2h\nmax_runtime_seconds: 7200\n", "either `max_runtime` or `max_runtime_seconds`, not both"),
])
def test_a_bad_max_runtime_in_a_job_file_names_the_file(text, message):
    with pytest.raises(JobSpecError, match=message) as info:
        parse_job("command: x\n" + text, "job.yaml")
    assert str(info.value).startswith("job.yaml: ")
