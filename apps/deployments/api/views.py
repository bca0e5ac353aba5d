from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from apps.core.serializers import DetailSerializer
from apps.projects.choices import Action
from apps.workloads.api.views import ERRORS, KindWorkloadViewSet
from apps.workloads.choices import Kind

from ..selectors import deployment_keys, deployment_revisions, deployment_rollout_status
from ..services import (
    deployment_key_create,
    deployment_key_revoke,
    deployment_revision_create,
    deployment_rollout_promote,
    deployment_rollout_rollback,
)
from .serializers import (
    DeploymentCreateSerializer,
    DeploymentKeyCreatedSerializer,
    DeploymentKeyCreateSerializer,
    DeploymentKeySerializer,
    DeploymentRevisionCreateSerializer,
    DeploymentRevisionSerializer,
    DeploymentSerializer,
    RolloutStatusSerializer,
)


class DeploymentViewSet(KindWorkloadViewSet):
    kind = Kind.DEPLOYMENT
    create_serializer_class = DeploymentCreateSerializer
    required_actions = {
        **KindWorkloadViewSet.required_actions,
        "create_key": Action.MANAGE_DEPLOYMENT_KEYS,
        "revoke_key": Action.MANAGE_DEPLOYMENT_KEYS,
        "create_revision": Action.SUBMIT,
        "promote": Action.SUBMIT,
        "rollback": Action.SUBMIT,
    }

    def get_serializer_class(self):
        if self.action in ("list", "retrieve"):
            return DeploymentSerializer
        return super().get_serializer_class()

    @extend_schema(request=DeploymentCreateSerializer, responses={201: DeploymentSerializer, **ERRORS})
    def create(self, request, project=None):
        response = super().create(request, project)
        if response.status_code == status.HTTP_201_CREATED:  # as GET answers it: gateway URL, lineage, scale
            workload = self.get_queryset().get(pk=response.data["id"])
            response.data = DeploymentSerializer(workload, context=self.get_serializer_context()).data
        return response

    # -- keys: who may call the deployment through the gateway without a Cairn account ------------

    @extend_schema(responses={200: DeploymentKeySerializer(many=True), **ERRORS},
                   summary="The deployment's keys (never their secrets)")
    @action(detail=True, methods=["get"], url_path="keys", pagination_class=None)
    def keys(self, request, project=None, pk=None):
        workload = self.get_object()
        return Response(DeploymentKeySerializer(deployment_keys(workload=workload), many=True).data)

    @extend_schema(request=DeploymentKeyCreateSerializer, responses={201: DeploymentKeyCreatedSerializer, **ERRORS},
                   summary="Create a deployment key (maintainer or owner); the key is shown once")
    @keys.mapping.post
    def create_key(self, request, project=None, pk=None):
        workload = self.get_object()
        serializer = DeploymentKeyCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key, secret = deployment_key_create(workload=workload, name=serializer.validated_data["name"],
                                            created_by=request.user)
        data = DeploymentKeySerializer(key).data
        return Response({**data, "key": secret}, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None, 404: DetailSerializer, **ERRORS},
                   summary="Revoke a deployment key (maintainer or owner)")
    @action(detail=True, methods=["delete"], url_path=r"keys/(?P<key_id>\d+)")
    def revoke_key(self, request, project=None, pk=None, key_id=None):
        workload = self.get_object()
        key = deployment_keys(workload=workload).filter(pk=key_id).first()
        if key is None:
            raise NotFound("Key not found.")
        deployment_key_revoke(key=key, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    # -- revisions and rollouts ------------------------------------------------------------------

    @extend_schema(responses={200: DeploymentRevisionSerializer(many=True), **ERRORS},
                   summary="The deployment's revisions, newest first")
    @action(detail=True, methods=["get"], url_path="revisions", pagination_class=None)
    def revisions(self, request, project=None, pk=None):
        workload = self.get_object()
        return Response(DeploymentRevisionSerializer(deployment_revisions(workload=workload), many=True).data)

    @extend_schema(request=DeploymentRevisionCreateSerializer, responses={201: DeploymentRevisionSerializer, **ERRORS},
                   summary="Change the command, image, env or resources: a new revision, rolled out (member or above)")
    @revisions.mapping.post
    def create_revision(self, request, project=None, pk=None):
        workload = self.get_object()
        serializer = DeploymentRevisionCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        revision = deployment_revision_create(
            workload=workload, changes=serializer.changes(), strategy=data["strategy"],
            canary_weight=data["canary_weight"], max_unavailable=data["max_unavailable"],
            max_surge=data["max_surge"], user=request.user)
        return Response(DeploymentRevisionSerializer(revision).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: RolloutStatusSerializer, **ERRORS}, summary="Which revision each replica runs")
    @action(detail=True, methods=["get"], url_path="rollout")
    def rollout(self, request, project=None, pk=None):
        return Response(RolloutStatusSerializer(deployment_rollout_status(workload=self.get_object())).data)

    @extend_schema(request=None, responses={200: RolloutStatusSerializer, **ERRORS},
                   summary="Promote the canary revision to every replica (member or above)")
    @action(detail=True, methods=["post"], url_path="rollout/promote")
    def promote(self, request, project=None, pk=None):
        workload = self.get_object()
        deployment_rollout_promote(workload=workload)
        return Response(RolloutStatusSerializer(deployment_rollout_status(workload=workload)).data)

    @extend_schema(request=None, responses={200: RolloutStatusSerializer, **ERRORS},
                   summary="Roll back: withdraw the canary, or go back to the previous revision (member or above)")
    @action(detail=True, methods=["post"], url_path="rollout/rollback")
    def rollback(self, request, project=None, pk=None):
        workload = self.get_object()
        deployment_rollout_rollback(workload=workload)
        return Response(RolloutStatusSerializer(deployment_rollout_status(workload=workload)).data)
