import json
import stat

import pytest

from cairn import config


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_defaults_when_no_file(cairn_env):
    settings = config.load()
    assert settings.path == cairn_env
    assert settings.url == config.DEFAULT_URL
    assert settings.token is None and settings.project is None


def test_cairn_config_env_var_picks_the_file(tmp_path, monkeypatch):
    path = tmp_path / "elsewhere.json"
    monkeypatch.setenv("CAIRN_CONFIG", str(path))
    assert config.config_path() == path


def test_default_path_is_under_home(monkeypatch, tmp_path):
    monkeypatch.delenv("CAIRN_CONFIG")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.config_path() == tmp_path / ".config" / "cairn" / "config.json"


def test_written_file_is_private_and_updates_keep_other_keys(cairn_env):
    config.update_file(url="http://x:1", token="cairn_a_b")
    config.update_file(project="vision")
    assert mode(cairn_env) == 0o600
    assert mode(cairn_env.parent) == 0o700
    assert json.loads(cairn_env.read_text()) == {
        "url": "http://x:1", "token": "cairn_a_b", "project": "vision"}
    config.update_file(token=None)
    assert "token" not in json.loads(cairn_env.read_text())
    assert mode(cairn_env) == 0o600


def test_an_existing_loose_file_is_tightened_on_write(cairn_env):
    cairn_env.parent.mkdir(parents=True)
    cairn_env.write_text("{}")
    cairn_env.chmod(0o644)
    config.update_file(token="cairn_a_b")
    assert mode(cairn_env) == 0o600


def test_env_vars_override_the_file(cairn_env, monkeypatch):
    config.write_file({"url": "http://file:1", "token": "file-token", "project": "file-proj"})
    monkeypatch.setenv("CAIRN_URL", "http://env:2")
    monkeypatch.setenv("CAIRN_TOKEN", "env-token")
    monkeypatch.setenv("CAIRN_PROJECT", "env-proj")
    settings = config.load()
    assert (settings.url, settings.token, settings.project) == (
        "http://env:2", "env-token", "env-proj")
    assert settings.from_env == {"url", "token", "project"}


def test_corrupt_file_is_a_clear_error(cairn_env):
    cairn_env.parent.mkdir(parents=True)
    cairn_env.write_text("{not json")
    with pytest.raises(config.ConfigError, match="not valid JSON"):
        config.load()
