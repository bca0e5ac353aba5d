from rest_framework import serializers

from apps.core.serializers import StrictSerializer

from ..choices import SourceKind
from ..models import Dataset, DatasetVersion, ModelVersion, RegisteredModel, Volume
from ..mounts import MAX_MOUNTS, NAME_RE, MountError, check_mount_path


def _name(value: str) -> str:
    if not NAME_RE.match(value):
        raise serializers.ValidationError("Use 1-63 lowercase letters, digits and '-', starting and ending with a "
                                          "letter or digit.")
    return value


def _mount(value: str) -> str:
    try:
        return check_mount_path(value)
    except MountError as exc:
        raise serializers.ValidationError(str(exc)) from None


# -- in workload specs -------------------------------------------------------------------------------

class VolumeMountSerializer(StrictSerializer):
    name = serializers.CharField(max_length=63, help_text="A volume of the project.")
    mount = serializers.CharField(required=False, max_length=1024,
                                  help_text="Where the replicas see it (default /data/<name>).")
    read_only = serializers.BooleanField(required=False, default=False)

    def validate_name(self, value):
        return _name(value)

    def validate_mount(self, value):
        return _mount(value)


class VolumeMountListField(serializers.ListField):
    def __init__(self, **kwargs):
        super().__init__(child=VolumeMountSerializer(), required=False, max_length=MAX_MOUNTS,
                         help_text="Project volumes to mount: [{name, mount, read_only}].", **kwargs)


# -- volumes ---------------------------------------------------------------------------------------------

class VolumeSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    used_bytes = serializers.SerializerMethodField(
        help_text="What the volume holds on the local backend's folder (null where Cairn cannot measure it).")
    default_mount = serializers.SerializerMethodField()

    class Meta:
        model = Volume
        fields = ["id", "name", "size_gb", "description", "used_bytes", "default_mount", "created_by", "created_at"]
        read_only_fields = fields

    def get_used_bytes(self, obj) -> int | None:
        usage = self.context.get("usage") or {}
        return usage.get(obj.pk)

    def get_default_mount(self, obj) -> str:
        return f"/data/{obj.name}"


class VolumeCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=63)
    size_gb = serializers.IntegerField(min_value=1, max_value=1024 * 1024, help_text="Size in GiB.")
    description = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")

    def validate_name(self, value):
        return _name(value)


class StorageUsageSerializer(serializers.Serializer):
    quota_gb = serializers.IntegerField(help_text="GiB of volumes the project may declare.")
    declared_gb = serializers.IntegerField(help_text="Sum of the project's volume sizes.")
    used_bytes = serializers.IntegerField(help_text="Bytes held in the project's volumes (local backend).")


# -- models --------------------------------------------------------------------------------------------------

class ModelRegisterQuerySerializer(StrictSerializer):
    name = serializers.CharField(max_length=63, help_text="The model's name; each registration adds a version.")

    def validate_name(self, value):
        return _name(value)


class ModelVersionSerializer(serializers.ModelSerializer):
    model = serializers.CharField(source="model.name", read_only=True)
    version = serializers.IntegerField(source="number", read_only=True)
    ref = serializers.SerializerMethodField(help_text="What a deployment's `model` field names: name@version.")
    run = serializers.IntegerField(source="run_id", read_only=True, allow_null=True,
                                   help_text="The run that produced it (lineage).")
    workload = serializers.IntegerField(source="workload_id", read_only=True, allow_null=True)
    files = serializers.ListField(child=serializers.DictField(), read_only=True)

    class Meta:
        model = ModelVersion
        fields = ["id", "model", "version", "ref", "run", "workload", "params", "metrics", "files", "total_bytes",
                  "created_at"]
        read_only_fields = fields

    def get_ref(self, obj) -> str:
        return f"{obj.model.name}@{obj.number}"


class RegisteredModelSerializer(serializers.ModelSerializer):
    versions = serializers.SerializerMethodField()
    latest = serializers.SerializerMethodField()

    class Meta:
        model = RegisteredModel
        fields = ["id", "name", "created_at", "latest", "versions"]
        read_only_fields = fields

    def get_versions(self, obj) -> int:
        return len(obj.versions.all())

    def get_latest(self, obj) -> int | None:
        numbers = [v.number for v in obj.versions.all()]
        return max(numbers) if numbers else None


class RegisteredModelDetailSerializer(RegisteredModelSerializer):
    versions = ModelVersionSerializer(many=True, read_only=True)

    class Meta(RegisteredModelSerializer.Meta):
        pass


# -- datasets ---------------------------------------------------------------------------------------------------

class DatasetMountSerializer(StrictSerializer):
    name = serializers.CharField(max_length=63, help_text="A dataset of the project.")
    version = serializers.IntegerField(required=False, min_value=1, help_text="Default: the latest version.")
    mount = serializers.CharField(required=False, max_length=1024,
                                  help_text="Where the replicas see it, read-only (default /datasets/<name>).")

    def validate_name(self, value):
        return _name(value)

    def validate_mount(self, value):
        return _mount(value)


class DatasetMountListField(serializers.ListField):
    def __init__(self, **kwargs):
        super().__init__(child=DatasetMountSerializer(), required=False, max_length=MAX_MOUNTS,
                         help_text="Dataset versions to mount read-only: [{name, version, mount}].", **kwargs)


class DatasetVersionSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(source="number", read_only=True)
    cached_on = serializers.SerializerMethodField(help_text="Nodes whose cache holds this version, complete.")

    class Meta:
        model = DatasetVersion
        fields = ["id", "version", "digest", "files", "total_bytes", "cached_on", "created_at"]
        read_only_fields = fields

    def get_cached_on(self, obj) -> list[str]:
        return sorted({e.node for e in obj.cache_entries.all()})


class DatasetSerializer(serializers.ModelSerializer):
    pool = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    has_credentials = serializers.SerializerMethodField()
    versions = DatasetVersionSerializer(many=True, read_only=True)

    class Meta:
        model = Dataset
        fields = ["id", "name", "source", "location", "pool", "description", "has_credentials", "versions",
                  "created_at"]
        read_only_fields = fields

    def get_has_credentials(self, obj) -> bool:
        return bool(obj.credentials_encrypted)


class DatasetManifestSerializer(DatasetVersionSerializer):
    manifest = serializers.ListField(child=serializers.DictField(), read_only=True)

    class Meta(DatasetVersionSerializer.Meta):
        fields = [*DatasetVersionSerializer.Meta.fields, "manifest"]
        read_only_fields = fields


class S3CredentialsSerializer(StrictSerializer):
    access_key_id = serializers.CharField(max_length=256)
    secret_access_key = serializers.CharField(max_length=256, trim_whitespace=False)


class DatasetCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=63)
    source = serializers.ChoiceField(choices=SourceKind.choices)
    location = serializers.DictField(
        help_text="s3: {bucket, prefix, endpoint_url, region}; nfs: {server, path}; host_path: {path}.")
    credentials = S3CredentialsSerializer(required=False, help_text="s3 only; stored encrypted, never shown again.")
    pool = serializers.CharField(required=False, max_length=40,
                                 help_text="host_path: the pool that allows it; s3: the pool whose "
                                           "fetch_allowed_hosts the endpoint may use.")
    description = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")

    def validate_name(self, value):
        return _name(value)


class SnapshotResultSerializer(serializers.Serializer):
    created = serializers.BooleanField(help_text="False when the source had not changed since the latest version.")
    version = DatasetVersionSerializer()
