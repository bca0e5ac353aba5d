from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, status
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.clusters.models import ResourcePool
from apps.core.serializers import DetailSerializer
from apps.projects.api.base import ProjectScopedViewSet
from apps.projects.choices import Action

from ..models import Dataset, DatasetVersion, ModelVersion, RegisteredModel, Volume
from ..selectors import storage_quota_gb, volume_used_bytes, volumes_declared_gb
from ..services import (
    dataset_delete,
    dataset_register,
    dataset_snapshot,
    model_delete,
    volume_create,
    volume_delete,
)
from .serializers import (
    DatasetCreateSerializer,
    DatasetManifestSerializer,
    DatasetSerializer,
    ModelVersionSerializer,
    RegisteredModelDetailSerializer,
    RegisteredModelSerializer,
    SnapshotResultSerializer,
    StorageUsageSerializer,
    VolumeCreateSerializer,
    VolumeSerializer,
)

ERRORS = {400: DetailSerializer, 401: DetailSerializer, 403: DetailSerializer, 404: DetailSerializer,
          409: DetailSerializer}


class VolumeViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ProjectScopedViewSet):
    """The project's volumes: shared, persistent folders mounted into workloads (`volumes` in a spec)."""

    queryset = Volume.objects.select_related("created_by")
    serializer_class = VolumeSerializer
    lookup_field = "name"
    lookup_value_regex = "[a-z0-9-]{1,63}"
    pagination_class = None
    required_actions = {"create": Action.SUBMIT, "destroy": Action.MANAGE_STORAGE}

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if self.action in ("list", "retrieve", "create") and hasattr(self, "project"):
            context["usage"] = {v.pk: volume_used_bytes(v) for v in Volume.objects.filter(project=self.project)}
        return context

    @extend_schema(request=VolumeCreateSerializer, responses={201: VolumeSerializer, **ERRORS},
                   summary="Create a volume (counts against the project's storage quota)")
    def create(self, request, project=None):
        serializer = VolumeCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        volume = volume_create(project=self.project, created_by=request.user, **serializer.validated_data)
        return Response(self.get_serializer(volume).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None, **ERRORS}, summary="Delete a volume and its files")
    def destroy(self, request, project=None, name=None):
        volume_delete(volume=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses={200: StorageUsageSerializer, **ERRORS},
                   summary="The project's storage quota and what its volumes declare and hold")
    @action(detail=False, methods=["get"])
    def usage(self, request, project=None):
        volumes = list(Volume.objects.filter(project=self.project))
        return Response({"quota_gb": storage_quota_gb(project=self.project),
                         "declared_gb": volumes_declared_gb(project=self.project),
                         "used_bytes": sum(volume_used_bytes(v) for v in volumes)})


class RegisteredModelViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ProjectScopedViewSet):
    """The project's registered models and their versions, with lineage (registered from jobs by
    `cairn.register_model(name, path)`)."""

    queryset = RegisteredModel.objects.prefetch_related(
        Prefetch("versions", queryset=ModelVersion.objects.select_related("model").order_by("-number")))
    serializer_class = RegisteredModelSerializer
    lookup_field = "name"
    lookup_value_regex = "[a-z0-9-]{1,63}"
    required_actions = {"destroy": Action.MANAGE_STORAGE}

    def get_serializer_class(self):
        return RegisteredModelDetailSerializer if self.action == "retrieve" else RegisteredModelSerializer

    @extend_schema(responses={200: ModelVersionSerializer, **ERRORS}, summary="One version of a model")
    @action(detail=True, methods=["get"], url_path=r"versions/(?P<number>[0-9]{1,9})")
    def version(self, request, project=None, name=None, number=None):
        model = self.get_object()
        version = next((v for v in model.versions.all() if v.number == int(number)), None)
        if version is None:
            raise exceptions.NotFound(f"Model '{model.name}' has no version {number}.")
        return Response(ModelVersionSerializer(version).data)

    @extend_schema(responses={204: None, **ERRORS}, summary="Delete a model, every version and its files")
    def destroy(self, request, project=None, name=None):
        model_delete(model=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class DatasetViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ProjectScopedViewSet):
    """The project's datasets: registered sources with immutable versions (manifests), and the
    nodes whose cache holds each version."""

    queryset = Dataset.objects.select_related("pool").prefetch_related(
        Prefetch("versions", queryset=DatasetVersion.objects.order_by("-number").prefetch_related("cache_entries")))
    serializer_class = DatasetSerializer
    lookup_field = "name"
    lookup_value_regex = "[a-z0-9-]{1,63}"
    required_actions = {"create": Action.SUBMIT, "snapshot": Action.SUBMIT, "destroy": Action.MANAGE_STORAGE}

    @extend_schema(request=DatasetCreateSerializer, responses={201: DatasetSerializer, **ERRORS},
                   summary="Register a dataset (its version 1 is the source's manifest now)")
    def create(self, request, project=None):
        serializer = DatasetCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        pool = None
        if data.get("pool"):
            pool = ResourcePool.objects.filter(name=data["pool"]).first()
            if pool is None:
                raise exceptions.NotFound(f"Pool '{data['pool']}' not found.")
        dataset = dataset_register(project=self.project, name=data["name"], source=data["source"],
                                   location=data["location"], credentials=data.get("credentials"), pool=pool,
                                   description=data["description"], created_by=request.user)
        return Response(DatasetSerializer(self.get_queryset().get(pk=dataset.pk)).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={201: SnapshotResultSerializer, 200: SnapshotResultSerializer, **ERRORS},
                   summary="Snapshot: the source's manifest now becomes a new version (unless unchanged)")
    @action(detail=True, methods=["post"])
    def snapshot(self, request, project=None, name=None):
        version, created = dataset_snapshot(dataset=self.get_object(), created_by=request.user)
        version = DatasetVersion.objects.prefetch_related("cache_entries").get(pk=version.pk)
        return Response(SnapshotResultSerializer({"created": created, "version": version}).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(responses={200: DatasetManifestSerializer, **ERRORS}, summary="One version with its manifest")
    @action(detail=True, methods=["get"], url_path=r"versions/(?P<number>[0-9]{1,9})")
    def version(self, request, project=None, name=None, number=None):
        dataset = self.get_object()
        version = next((v for v in dataset.versions.all() if v.number == int(number)), None)
        if version is None:
            raise exceptions.NotFound(f"Dataset '{dataset.name}' has no version {number}.")
        return Response(DatasetManifestSerializer(version).data)

    @extend_schema(responses={204: None, **ERRORS}, summary="Delete a dataset (its source is left alone)")
    def destroy(self, request, project=None, name=None):
        dataset_delete(dataset=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
