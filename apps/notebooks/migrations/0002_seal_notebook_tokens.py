"""Issue 44: notebooks' tokens were kept in plain text in Workload.runtime["token"]; now they are
encrypted with the credentials key (apps.clusters.crypto.seal). Seal the ones already stored."""
from django.db import migrations

BATCH = 500


def _rows(apps):
    Workload = apps.get_model("workloads", "Workload")
    return Workload.objects.filter(kind="notebook", runtime__has_key="token").only("pk", "runtime")


def seal_tokens(apps, schema_editor):
    from apps.clusters.crypto import SEALED_PREFIX, seal

    for workload in _rows(apps).iterator(chunk_size=BATCH):
        token = workload.runtime.get("token")
        if isinstance(token, str) and token and not token.startswith(SEALED_PREFIX):
            workload.runtime["token"] = seal(token)
            workload.save(update_fields=["runtime"])


def unseal_tokens(apps, schema_editor):
    from apps.clusters.crypto import CredentialsUnreadable, unseal

    for workload in _rows(apps).iterator(chunk_size=BATCH):
        token = workload.runtime.get("token")
        if isinstance(token, str) and token:
            try:
                workload.runtime["token"] = unseal(token)
            except CredentialsUnreadable:
                workload.runtime["token"] = None  # unusable either way: the notebook must start again
            workload.save(update_fields=["runtime"])


class Migration(migrations.Migration):
    dependencies = [
        ("notebooks", "0001_initial"),
        ("workloads", "0009_workload_finished_at_index"),
    ]

    operations = [migrations.RunPython(seal_tokens, unseal_tokens)]
