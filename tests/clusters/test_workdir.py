"""apps.clusters.workdir: what a working directory may be, on the text (submit) and on disk (launch)."""
import os
from pathlib import Path

import pytest

from apps.clusters.workdir import (
    WorkingDirError,
    check_container_working_dir,
    check_working_dir,
    normalise_root,
    resolve_working_dir,
)

DATA = "/srv/cairn-data"


@pytest.mark.parametrize("value", [
    "/", "/etc", "/etc/", "//etc", "/root", "/proc/1", "/tmp",
    "../../..", "..", "a/../../b", "a/..", "./../x",
    "~", "~/x", "~root", "~root/.ssh",
    "", "   ", " /data/x", "data\x00", "x" * 4097,
    f"{DATA}", f"{DATA}/cairn.sqlite3", f"{DATA}/workloads/7/work", f"{DATA}/workloads/7/attempt-1",
    "/data/shared/../../etc", "/data/sharedother", "/data",
])
def test_refused_forms(value):
    with pytest.raises(WorkingDirError) as caught:
        check_working_dir(value, allowed_roots=["/data/shared"], denied_roots=[DATA])
    assert str(caught.value)


@pytest.mark.parametrize("value, stored", [
    ("src", "src"), ("a//b/./", "a/b"), (".", "."), ("out/checkpoints", "out/checkpoints"),
    ("/data/shared", "/data/shared"), ("/data/shared/", "/data/shared"), ("/data/shared/imagenet/train",
                                                                         "/data/shared/imagenet/train"),
    ("/data//shared/./x", "/data/shared/x"),
])
def test_allowed_forms(value, stored):
    assert check_working_dir(value, allowed_roots=["/data/shared"], denied_roots=[DATA]) == stored


def test_messages_name_the_allowed_roots():
    with pytest.raises(WorkingDirError, match="/data/a, /data/b"):
        check_working_dir("/etc", allowed_roots=["/data/b", "/data/a"])
    with pytest.raises(WorkingDirError, match="allows no other directory"):
        check_working_dir("/etc", allowed_roots=[])


def test_data_folder_is_refused_even_inside_an_allowed_root():
    """Embedded mode allows the checkout, which holds var/ (the data folder) by default."""
    with pytest.raises(WorkingDirError, match="data folder"):
        check_working_dir("/repo/var/workloads/3/work", allowed_roots=["/repo"], denied_roots=["/repo/var"])
    assert check_working_dir("/repo/examples", allowed_roots=["/repo"], denied_roots=["/repo/var"]) == "/repo/examples"
    assert check_working_dir("/repo/variants", allowed_roots=["/repo"], denied_roots=["/repo/var"])


def test_malformed_stored_roots_allow_nothing():
    for root in ["relative", "/", "", "/a/../b"]:
        with pytest.raises(WorkingDirError):
            check_working_dir("/a/b", allowed_roots=[root])


@pytest.mark.parametrize("value, normal", [("/data", "/data"), ("/data/", "/data"), ("//data//x/.", "/data/x")])
def test_normalise_root(value, normal):
    assert normalise_root(value) == normal


@pytest.mark.parametrize("value", ["data", "/", "//", "/a/../b", "~/x", "", "/a\x00"])
def test_normalise_root_refuses(value):
    with pytest.raises(WorkingDirError):
        normalise_root(value)


@pytest.mark.parametrize("value", ["workspace", "../x", "/a/../b", "~", "", "/x\x00"])
def test_container_working_dir_refused(value):
    with pytest.raises(WorkingDirError):
        check_container_working_dir(value)


def test_container_working_dir_is_any_absolute_path():
    assert check_container_working_dir("/workspace/./src/") == "/workspace/src"
    assert check_container_working_dir("/etc") == "/etc"  # inside the container: its own /etc


# -- resolve_working_dir: on the real file system -----------------------------------------------

@pytest.fixture
def layout(tmp_path):
    data = tmp_path / "data"
    work = data / "workloads" / "1" / "work"
    other = data / "workloads" / "2" / "work"
    shared = tmp_path / "shared"
    for d in (work, other, shared / "imagenet"):
        d.mkdir(parents=True)
    return {"data": data, "work": work, "other": other, "shared": shared, "tmp": tmp_path}


def resolve(layout, value):
    return resolve_working_dir(value, work_dir=layout["work"], allowed_roots=[str(layout["shared"])],
                               denied_roots=[str(layout["data"])])


def test_no_value_is_the_work_folder_created(tmp_path):
    work = tmp_path / "w" / "work"
    assert resolve_working_dir(None, work_dir=work, allowed_roots=[]) == Path(os.path.realpath(work))
    assert work.is_dir()
    assert resolve_working_dir("", work_dir=work, allowed_roots=[]) == Path(os.path.realpath(work))


def test_relative_folder_is_created_inside_the_work_folder(layout):
    path = resolve(layout, "runs/a")
    assert path == Path(os.path.realpath(layout["work"] / "runs" / "a")) and path.is_dir()


def test_allowed_root_and_its_subfolders(layout):
    assert resolve(layout, str(layout["shared"])) == Path(os.path.realpath(layout["shared"]))
    assert resolve(layout, str(layout["shared"] / "imagenet")) == Path(os.path.realpath(layout["shared"] / "imagenet"))


def test_missing_absolute_directory_is_not_created(layout):
    with pytest.raises(WorkingDirError, match="does not exist"):
        resolve(layout, str(layout["shared"] / "nope"))
    assert not (layout["shared"] / "nope").exists()


@pytest.mark.parametrize("value", ["/", "/etc", "../../..", "~", "~root"])
def test_resolve_refuses_what_submit_refuses(layout, value):
    with pytest.raises(WorkingDirError):
        resolve(layout, value)


def test_resolve_refuses_data_folder_and_another_workloads_folder(layout):
    for target in (layout["data"], layout["other"]):
        with pytest.raises(WorkingDirError):
            resolve(layout, str(target))


def test_symlink_in_the_work_folder_pointing_at_etc_is_refused(layout):
    (layout["work"] / "etc").symlink_to("/etc")
    with pytest.raises(WorkingDirError, match="symbolic link"):
        resolve(layout, "etc")
    with pytest.raises(WorkingDirError, match="symbolic link"):
        resolve(layout, "etc/newdir")
    assert not Path("/etc/newdir").exists()


def test_symlink_to_another_workloads_folder_is_refused(layout):
    (layout["work"] / "peer").symlink_to(layout["other"])
    with pytest.raises(WorkingDirError):
        resolve(layout, "peer")


def test_symlink_in_an_allowed_root_leading_out_is_refused(layout):
    (layout["shared"] / "escape").symlink_to("/etc")
    (layout["shared"] / "into-data").symlink_to(layout["data"])
    with pytest.raises(WorkingDirError, match="symbolic link"):
        resolve(layout, str(layout["shared"] / "escape"))
    with pytest.raises(WorkingDirError, match="data folder"):
        resolve(layout, str(layout["shared"] / "into-data" / "workloads"))


def test_symlink_staying_inside_is_fine(layout):
    (layout["work"] / "real").mkdir()
    (layout["work"] / "alias").symlink_to(layout["work"] / "real")
    assert resolve(layout, "alias") == Path(os.path.realpath(layout["work"] / "real"))


def test_allowed_root_that_is_itself_a_symlink(layout):
    link = layout["tmp"] / "datasets"
    link.symlink_to(layout["shared"])
    path = resolve_working_dir(str(link / "imagenet"), work_dir=layout["work"], allowed_roots=[str(link)])
    assert path == Path(os.path.realpath(layout["shared"] / "imagenet"))
