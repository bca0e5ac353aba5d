from django.contrib.auth import authenticate, login, logout
from django.middleware.csrf import get_token
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.audit.context import ClientScopedRateThrottle
from apps.core.serializers import DetailSerializer

from ..models import ApiToken
from ..selectors import user_projects
from ..services import api_token_create, api_token_login, api_token_revoke
from .serializers import (
    ApiTokenCreatedSerializer,
    ApiTokenCreateSerializer,
    ApiTokenSerializer,
    LoginResponseSerializer,
    LoginSerializer,
    MeSerializer,
    SessionLoginSerializer,
    SessionStateSerializer,
)


def _me(user) -> dict:
    return {"id": user.pk, "username": user.username, "email": user.email, "is_staff": user.is_staff,
            "projects": user_projects(user)}


class MeView(APIView):
    @extend_schema(responses={200: MeSerializer, 401: DetailSerializer}, summary="The signed-in user and their projects")
    def get(self, request):
        return Response(_me(request.user))


class LoginView(APIView):
    """Exchange a username and password for a new API token (what `cairn login` does)."""

    permission_classes = [AllowAny]
    authentication_classes = []
    throttle_classes = [ClientScopedRateThrottle]
    throttle_scope = "login"

    @extend_schema(request=LoginSerializer,
                   responses={201: LoginResponseSerializer, 400: DetailSerializer, 401: DetailSerializer},
                   summary="Log in and receive an API token (401: wrong username or password)")
    def post(self, request):
        serializer = LoginSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = authenticate(request, username=data["username"], password=data["password"])
        if user is None or not user.is_active:  # 401, the convention for credentials refused
            return Response({"detail": "Wrong username or password."}, status=status.HTTP_401_UNAUTHORIZED,
                            headers={"WWW-Authenticate": 'Bearer realm="cairn"'})
        token, secret = api_token_login(user=user, token_name=data["token_name"])
        return Response({"token": secret, "expires_at": token.expires_at, "user": _me(user)},
                        status=status.HTTP_201_CREATED)


class SessionView(APIView):
    """Session sign-in for the dashboard (a Django session cookie, not an API token).

    Every write here needs the CSRF token (the `csrftoken` cookie sent back as X-CSRFToken),
    sign-in included, so another site cannot sign a browser in to an account of its choosing."""

    permission_classes = [AllowAny]
    authentication_classes = [SessionAuthentication]  # enforces CSRF for signed-in writes
    throttle_scope = "login"

    def get_throttles(self):
        return [ClientScopedRateThrottle()] if self.request.method == "POST" else []

    @extend_schema(responses={200: SessionStateSerializer},
                   summary="Whether this browser session is signed in; sets the csrftoken cookie")
    def get(self, request):
        get_token(request._request)  # makes CsrfViewMiddleware set the cookie
        user = request.user
        if user.is_authenticated:
            return Response({"authenticated": True, "user": _me(user)})
        return Response({"authenticated": False, "user": None})

    @extend_schema(request=SessionLoginSerializer,
                   responses={200: MeSerializer, 400: DetailSerializer, 403: DetailSerializer,
                              429: DetailSerializer},
                   summary="Sign in with a username and password (session cookie; needs X-CSRFToken)")
    def post(self, request):
        SessionAuthentication().enforce_csrf(request._request)  # also when nobody is signed in yet
        serializer = SessionLoginSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = authenticate(request._request, username=data["username"], password=data["password"])
        if user is None or not user.is_active:
            return Response({"detail": "Wrong username or password."}, status=status.HTTP_400_BAD_REQUEST)
        login(request._request, user)  # new session key, rotated CSRF token
        return Response(_me(user))

    @extend_schema(request=None, responses={204: None, 403: DetailSerializer},
                   summary="Sign out of this browser session (needs X-CSRFToken)")
    def delete(self, request):
        logout(request._request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ApiTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                      mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Your own API tokens. The secret is returned once, at creation."""

    serializer_class = ApiTokenSerializer
    queryset = ApiToken.objects.all()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ApiToken.objects.none()
        return ApiToken.objects.filter(user=self.request.user)

    @extend_schema(request=ApiTokenCreateSerializer, responses={201: ApiTokenCreatedSerializer})
    def create(self, request, *args, **kwargs):
        serializer = ApiTokenCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token, secret = api_token_create(user=request.user, **serializer.validated_data)
        token.token = secret
        return Response(ApiTokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Revoke a token", responses={204: None, 409: DetailSerializer})
    def destroy(self, request, *args, **kwargs):
        api_token_revoke(token=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
