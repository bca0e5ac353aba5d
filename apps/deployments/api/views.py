from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from apps.core.serializers import DetailSerializer
from apps.projects.choices import Action
from apps.workloads.api.views import ERRORS, KindWorkloadViewSet
from apps.workloads.choices import Kind

from ..selectors import deployment_keys, gateway_url
from ..services import deployment_key_create, deployment_key_revoke
from .serializers import (
    DeploymentCreateSerializer,
    DeploymentKeyCreatedSerializer,
    DeploymentKeyCreateSerializer,
    DeploymentKeySerializer,
    DeploymentSerializer,
)


class DeploymentViewSet(KindWorkloadViewSet):
    kind = Kind.DEPLOYMENT
    create_serializer_class = DeploymentCreateSerializer
    required_actions = {
        **KindWorkloadViewSet.required_actions,
        "create_key": Action.MANAGE_DEPLOYMENT_KEYS,
        "revoke_key": Action.MANAGE_DEPLOYMENT_KEYS,
    }

    def get_serializer_class(self):
        if self.action in ("list", "retrieve"):
            return DeploymentSerializer
        return super().get_serializer_class()

    @extend_schema(request=DeploymentCreateSerializer, responses={201: DeploymentSerializer, **ERRORS})
    def create(self, request, project=None):
        response = super().create(request, project)
        if response.status_code == status.HTTP_201_CREATED:
            response.data = {**response.data, "gateway_url": gateway_url(project=self.project.slug,
                                                                         name=response.data["name"])}
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
