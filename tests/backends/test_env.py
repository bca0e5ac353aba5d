"""The environment of a local replica: what launchers and the SDK need, and nothing of Cairn's."""
import json

import pytest

from apps.backends.replica_env import expand_command, replica_env, replica_gpus, reserved_env
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted, reconcile_until
from tests.factories import ProjectFactory

S = WorkloadStatus

DUMP_ENV = ["python", "-c", "import json, os; print(json.dumps(dict(os.environ)))"]


@pytest.mark.django_db(transaction=True)
def test_user_env_cannot_override_reserved_keys(settings, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "cairn-secret")
    settings.CAIRN = {**settings.CAIRN, "PUBLIC_URL": "http://cairn.test:8000"}
    user_env = {
        "RANK": "99", "WORLD_SIZE": "99", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1",
        "CUDA_VISIBLE_DEVICES": "0,1", "CAIRN_PROJECT": "someone-else", "CAIRN_API_URL": "http://evil",
        "CAIRN_EXTRA": "x", "FOO": "bar", "PYTHONUNBUFFERED": "0",
    }
    workload = admitted(
        project=ProjectFactory(slug="vision"), name="env-dump", spec={"command": DUMP_ENV, "env": user_env}
    )
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.SUCCEEDED)
    env = json.loads(workload_log_read(workload=workload))

    assert env["RANK"] == "0" and env["WORLD_SIZE"] == "1" and env["LOCAL_RANK"] == "0" and env["NODE_RANK"] == "0"
    assert env["MASTER_ADDR"] == "127.0.0.1"
    assert env["MASTER_PORT"] == str(workload.runtime["master_port"]) != "1"
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # no GPU requested
    assert env["CAIRN_PROJECT"] == "vision"
    assert env["CAIRN_API_URL"] == "http://cairn.test:8000"
    assert env["CAIRN_WORKLOAD_ID"] == str(workload.pk)
    assert env["CAIRN_WORKLOAD_NAME"] == "env-dump"
    assert env["CAIRN_KIND"] == "training"
    assert env["CAIRN_ATTEMPT"] == "1" and env["CAIRN_REPLICA"] == "0"
    assert "CAIRN_EXTRA" not in env
    assert env["FOO"] == "bar"
    assert env["PYTHONUNBUFFERED"] == "0"  # not reserved: the user may change it
    assert "SECRET_KEY" not in env and "DATABASE_URL" not in env  # Cairn's own secrets stay home
    ignored = workload.events.get(reason="ReservedEnvIgnored").message
    assert "RANK" in ignored and "CAIRN_PROJECT" in ignored and "FOO" not in ignored


def test_replica_env_puts_reserved_keys_last():
    reserved = reserved_env(
        workload_id=7, workload_name="w", kind="training", project="p", api_url="http://a", attempt=2,
        replica=1, replicas=4, master_port=1234, gpus=[2, 3],
    )
    env, ignored = replica_env(base={"PATH": "/bin", "HOME": "/h"}, user={"RANK": "0", "X": 1}, reserved=reserved)
    assert env["RANK"] == "1" and env["WORLD_SIZE"] == "4" and env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert env["X"] == "1" and env["PATH"] == "/bin"
    assert "PORT" not in env
    assert ignored == ["RANK"]


def test_expand_command_like_kubernetes():
    env = {"PORT": "8080", "NAME": "x"}
    assert expand_command(["serve", "--port", "$(PORT)", "$(NAME)-$(MISSING)", "$$(PORT)", "$PORT"], env) == [
        "serve", "--port", "8080", "x-$(MISSING)", "$(PORT)", "$PORT",
    ]


def test_replica_gpus():
    assert replica_gpus(replica=0, gpu_milli=0, placement=None, node_gpu_count=8) == []
    assert replica_gpus(replica=1, gpu_milli=2000, placement=None, node_gpu_count=8) == [2, 3]
    assert replica_gpus(replica=1, gpu_milli=500, placement=None, node_gpu_count=8) == [1]
    assert replica_gpus(replica=0, gpu_milli=1000, placement={"gpus": [5]}, node_gpu_count=8) == [5]


def test_every_vendors_device_variable_names_the_placed_devices_and_users_cannot_override_them():
    reserved = reserved_env(
        workload_id=7, workload_name="w", kind="training", project="p", api_url="http://a", attempt=1,
        replica=0, replicas=1, master_port=1234, gpus=[4, 5],
    )
    user = {"ASCEND_RT_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"}
    env, ignored = replica_env(base={}, user=user, reserved=reserved)
    assert [env[k] for k in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                             "ASCEND_RT_VISIBLE_DEVICES")] == ["4,5"] * 4
    assert ignored == ["ASCEND_RT_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"]
