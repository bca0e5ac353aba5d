"""Network profiles (apps/clusters/networks.py): what an admin may let a pool's training pods ask
for, checked the same way in the model, the admin and the API (400 with the field and why)."""
import pytest

from apps.clusters.models import NetworkProfile
from tests.factories import PoolFactory

URL = "/api/v1/network-profiles/"
INFINIBAND = {"name": "infiniband", "resources": {"rdma/hca_shared_devices_a": 1}, "networks": ["ib-net"],
              "capabilities": ["IPC_LOCK"], "runtime_class_name": "rdma-runc", "pod_security_level": "privileged",
              "env": {"NCCL_IB_HCA": "mlx5"}}


def test_an_admin_defines_a_profile_and_everyone_reads_it(admin_user, alice, client_for):
    response = client_for(admin_user).post(URL, INFINIBAND, format="json")
    assert response.status_code == 201, response.json()
    assert NetworkProfile.objects.get(name="infiniband").capabilities == ["IPC_LOCK"]
    assert client_for(alice).get(URL).json()["results"][0]["name"] == "infiniband"
    assert client_for(alice).post(URL, {**INFINIBAND, "name": "mine"}, format="json").status_code == 403


@pytest.mark.parametrize("change, field, words", [
    ({"privileged": True}, "privileged", "privileged containers"),
    ({"host_network": True}, "host_network", "hostNetwork"),
    ({"hostPath": "/dev/infiniband"}, "hostPath", "host paths"),
    ({"capabilities": ["SYS_ADMIN"]}, "capabilities", "SYS_ADMIN cannot be granted"),
    ({"capabilities": ["NET_ADMIN", "IPC_LOCK"]}, "capabilities", "NET_ADMIN cannot be granted"),
    ({"pod_security_level": "restricted"}, "pod_security_level", "refuses pods that add IPC_LOCK"),
    ({"pod_security_level": "anything"}, "pod_security_level", "not a valid choice"),
    ({"resources": {"nvidia.com/gpu": 8}}, "resources", "Cairn's to set"),
    ({"resources": {"cpu": 1}}, "resources", "not an extended resource name"),
    ({"resources": {"rdma/hca": 0}}, "resources", "whole number"),
    ({"networks": ["bad name!"]}, "networks", "NetworkAttachmentDefinitions"),
    ({"runtime_class_name": "Not_DNS"}, "runtime_class_name", "RuntimeClass"),
    ({"env": {"LD_PRELOAD": "/x.so"}}, "env", "LD_PRELOAD"),
    ({"surprise": 1}, "surprise", "Unknown field"),
])
def test_bad_profiles_answer_400_naming_the_field(admin_user, client_for, change, field, words):
    response = client_for(admin_user).post(URL, {**INFINIBAND, **change}, format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert words in " ".join(body["errors"][field]) and words in body["detail"], body
    assert not NetworkProfile.objects.exists()


def test_the_model_checks_the_same_and_normalises(db):
    from django.core.exceptions import ValidationError

    profile = NetworkProfile(name="roce", capabilities=["cap_ipc_lock"], pod_security_level="privileged")
    profile.full_clean()
    assert profile.capabilities == ["IPC_LOCK"]
    with pytest.raises(ValidationError) as refused:
        NetworkProfile(name="root", capabilities=["SYS_ADMIN"], pod_security_level="privileged").full_clean()
    assert "capabilities" in refused.value.message_dict


def test_a_profile_in_use_cannot_be_deleted(admin_user, client_for):
    response = client_for(admin_user).post(URL, INFINIBAND, format="json")
    PoolFactory(name="ib-pool", network_profile=NetworkProfile.objects.get())
    answer = client_for(admin_user).delete(f"{URL}{response.json()['id']}/")
    assert answer.status_code == 409 and "ib-pool" in answer.json()["detail"]
