"""Local accelerator probes: rocm-smi and npu-smi output (recorded samples) -> inventory, and
the local node's vendor and architecture."""
import os
import platform
import stat
from pathlib import Path

import pytest

from apps.clusters.accelerators import check_accelerators_config, normalise_arch, vendors_for_cluster
from apps.clusters.probes import AcceleratorInventory, parse_npu_smi, parse_rocm_smi, probe_npu_smi, probe_rocm_smi

SAMPLES = Path(__file__).parent / "samples"


def test_rocm_smi_json_gives_count_model_and_memory():
    inv = parse_rocm_smi((SAMPLES / "rocm-smi.json").read_text())
    assert inv == AcceleratorInventory(type="amd", count=4, model="AMD Instinct MI300X", memory_mb=196288)


def test_npu_smi_table_gives_count_model_and_hbm():
    inv = parse_npu_smi((SAMPLES / "npu-smi-info.txt").read_text())
    assert inv == AcceleratorInventory(type="ascend", count=4, model="910B3", memory_mb=65536)


def test_empty_or_foreign_output_is_no_accelerator():
    assert parse_npu_smi("npu-smi: command failed\n").count == 0
    assert parse_rocm_smi("{}").count == 0
    with pytest.raises(ValueError):
        parse_rocm_smi("not json")


def test_probes_run_the_tools_found_on_path(tmp_path, monkeypatch):
    """Real processes: fake rocm-smi / npu-smi scripts on PATH print the recorded samples."""
    for name, sample in (("rocm-smi", "rocm-smi.json"), ("npu-smi", "npu-smi-info.txt")):
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\ncat '{SAMPLES / sample}'\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert probe_rocm_smi().count == 4
    assert probe_npu_smi().model == "910B3"
    (tmp_path / "npu-smi").write_text("#!/bin/sh\nexit 3\n")
    assert probe_npu_smi() == AcceleratorInventory()


def test_probes_without_the_tools_find_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert probe_rocm_smi() == AcceleratorInventory() and probe_npu_smi() == AcceleratorInventory()


def test_architecture_names_normalise_to_kubernetes_names():
    assert [normalise_arch(x) for x in ("x86_64", "AMD64", "aarch64", "arm64", "sparc")] == [
        "amd64", "amd64", "arm64", "arm64", ""]
    assert normalise_arch(platform.machine()) in ("amd64", "arm64")


def test_cluster_overrides_and_legacy_nvidia_keys():
    vendors = vendors_for_cluster({"gpu_resource": "example.com/gpu",
                                   "accelerators": {"ascend": {"resource": "huawei.com/Ascend910B",
                                                               "shared_resources": {"huawei.com/Ascend910B": "one"}}}})
    assert vendors["nvidia"].resource == "example.com/gpu"
    assert vendors["ascend"].resource == "huawei.com/Ascend910B"
    assert vendors["ascend"].shared_resources == {"huawei.com/Ascend910B": "one"}
    assert vendors["amd"].resource == "amd.com/gpu" and vendors["amd"].shared_resources == {}


@pytest.mark.parametrize("bad", [[], {"intel": {}}, {"amd": {"resource": ""}}, {"amd": {"colour": "red"}},
                                 {"ascend": {"shared_resources": {"x": "half"}}}])
def test_bad_accelerators_config_is_explained(bad):
    assert check_accelerators_config(bad)
