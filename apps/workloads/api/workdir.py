"""`working_dir` for the kinds whose replicas run a user's command (training jobs, deployments)."""
from django.conf import settings
from rest_framework import serializers

from apps.clusters.backends import backend_spec
from apps.clusters.workdir import (
    WorkingDirError,
    check_container_working_dir,
    check_working_dir,
    check_working_dir_form,
)


class WorkingDirMixin(serializers.Serializer):
    working_dir = serializers.CharField(
        required=False, max_length=4096, trim_whitespace=False,
        help_text="Where the replicas start. Local pools: a path relative to the workload's own folder (created if "
                  "missing), or an absolute path inside a directory the pool allows (`allowed_paths` of the pool). "
                  "Kubernetes pools: an absolute path inside the container. Default: the workload's own folder.",
    )

    def validate_working_dir(self, value):
        """What holds on every pool ('..', '~', NUL); the pool's own rules come in validate_for_pool."""
        try:
            return check_working_dir_form(value)
        except WorkingDirError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_for_pool(self, pool) -> None:
        super().validate_for_pool(pool)
        value = self.validated_data.get("working_dir")
        if not value:
            return
        try:
            if backend_spec(pool.cluster.backend).container_workdir:
                value = check_container_working_dir(value)
            else:
                value = check_working_dir(value, allowed_roots=pool.allowed_paths or [],
                                          denied_roots=[str(settings.CAIRN_DATA_DIR)])
        except WorkingDirError as exc:
            raise serializers.ValidationError({"working_dir": [str(exc)]}) from None
        self.validated_data["working_dir"] = value

    def build_spec(self, data):
        spec = super().build_spec(data)
        if data.get("working_dir"):
            spec["working_dir"] = data["working_dir"]
        return spec
