"""`cairn volume ...` against Cairn itself (pytest-django's live server on the test database)."""
import json

import pytest

from cairn import cli
from tests.factories import make_token

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cairn(live_server, alice, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CAIRN_CONFIG", str(tmp_path / "cfg.json"))
    monkeypatch.setenv("CAIRN_URL", live_server.url)
    monkeypatch.setenv("CAIRN_TOKEN", make_token(alice))
    monkeypatch.setenv("CAIRN_PROJECT", "vision")
    monkeypatch.setenv("COLUMNS", "200")

    def run(*argv):
        code = cli.main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_volume_create_ls_rm(cairn, project):
    code, out, _ = cairn("volume", "create", "images", "--size", "3")
    assert code == 0 and "Created volume images (3 GiB)" in out and "/data/images" in out
    code, out, _ = cairn("volume", "ls")
    assert code == 0 and "images" in out and "3 of 100 GiB declared" in out
    code, out, _ = cairn("volume", "ls", "--json")
    assert json.loads(out)["volumes"][0]["name"] == "images"
    code, out, err = cairn("volume", "create", "images", "--size", "1")
    assert code == 1 and "already exists" in err
    code, out, _ = cairn("volume", "rm", "images")
    assert code == 0 and "Deleted volume images" in out
    code, _, err = cairn("volume", "rm", "images")
    assert code == 1 and "404" in err


def test_model_ls_and_show_with_lineage(cairn, project, client_for, alice):
    from apps.tracking.models import Param, Run
    from tests.storage.test_models_api import archive, upload

    run = Run.objects.create(project=project, name="train")
    Param.objects.create(run=run, key="lr", value=0.1)
    upload(client_for(alice), run, "resnet", archive({"w.bin": b"12345"}))
    code, out, _ = cairn("model", "ls")
    assert code == 0 and "resnet" in out and "@1" in out
    code, out, _ = cairn("model", "show", "resnet")
    assert code == 0 and "resnet@1" in out and str(run.pk) in out and "lr=0.1" in out
    code, out, _ = cairn("model", "show", "resnet@1", "--json")
    assert json.loads(out)["run"] == run.pk
    code, _, err = cairn("model", "show", "resnet@4")
    assert code == 1 and "no version 4" in err


def test_dataset_register_ls_show_snapshot(cairn, project, s3_server, monkeypatch):
    s3_server.make_bucket("corpus")
    s3_server.put("corpus", "imgs/a.bin", b"a" * 10)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example-secret")
    code, out, err = cairn("dataset", "register", "imgs", "--s3", "s3://corpus/imgs", "--endpoint", s3_server.url)
    assert code == 0, err
    assert "version 1, 1 files, 10 B" in out
    code, out, _ = cairn("dataset", "ls")
    assert code == 0 and "imgs" in out and "@1" in out
    code, out, _ = cairn("dataset", "snapshot", "imgs")
    assert code == 0 and "Unchanged since imgs@1" in out
    s3_server.put("corpus", "imgs/b.bin", b"b")
    code, out, _ = cairn("dataset", "snapshot", "imgs")
    assert code == 0 and "New version imgs@2: 2 files" in out
    code, out, _ = cairn("dataset", "show", "imgs")
    assert code == 0 and "@2" in out and "@1" in out
    code, _, err = cairn("dataset", "register", "x")
    assert code != 0 and "give the source" in err
