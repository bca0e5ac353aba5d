import csv
import time

from django.db.models import Prefetch
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, mixins, status
from rest_framework.authentication import get_authorization_header
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.serializers import DetailSerializer
from apps.projects.api.base import ProjectScopedViewSet
from apps.projects.choices import Action
from apps.storage.api.parsers import ArchiveUploadParser
from apps.storage.api.serializers import ModelRegisterQuerySerializer, ModelVersionSerializer
from apps.storage.services import model_version_register

from ..authentication import RunTokenAuthentication
from ..models import RUN_TOKEN_PREFIX, MetricSummary, Param, Run, RunToken
from ..parsers import IngestJSONParser
from ..selectors import csv_rows, points_page, run_params, run_summaries, runs_compare, runs_listed, series_read
from ..services import run_checkpoint_report, run_create, run_delete, run_finish, run_ingest, run_token_create
from ..throttling import IngestRateThrottle
from ..validation import parse_batch
from . import fast
from .serializers import (
    BatchResultSerializer,
    BatchSerializer,
    CheckpointReportedSerializer,
    CheckpointReportSerializer,
    CompareQuerySerializer,
    ExportQuerySerializer,
    PointsQuerySerializer,
    RunCreatedSerializer,
    RunCreateSerializer,
    RunDetailSerializer,
    RunFinishSerializer,
    RunSerializer,
    SeriesQuerySerializer,
)

ERRORS = {400: DetailSerializer, 401: DetailSerializer, 403: DetailSerializer, 404: DetailSerializer,
          409: DetailSerializer}
RUN_TOKEN_ACTIONS = frozenset({"batches", "finish", "checkpoints", "register_model"})
LIGHT_ACTIONS = frozenset({"series", "points", "export", "batches", "destroy"})


class _Echo:
    def write(self, value):
        return value


class RunViewSet(mixins.ListModelMixin, ProjectScopedViewSet):
    """Tracked runs of a project: create (standalone), ingest batches, read series, compare, export.

    `batches` and `finish` also accept the run's own write-only token (CAIRN_RUN_TOKEN)."""

    # Idempotent on `client_id` instead: the answer holds a run token, which must not be stored.
    idempotency_keys = False

    queryset = Run.objects.select_related("created_by").prefetch_related(
        Prefetch("summaries", queryset=MetricSummary.objects.order_by("key"))
    )
    serializer_class = RunSerializer
    filterset_fields = ["workload", "status", "attempt"]
    ordering_fields = ["created_at", "name", "status"]
    ordering = ["-created_at", "-id"]
    required_actions = {"create": Action.SUBMIT, "destroy": Action.SUBMIT, "batches": Action.SUBMIT,
                        "finish": Action.SUBMIT, "checkpoints": Action.SUBMIT, "register_model": Action.SUBMIT}

    @classmethod
    def as_view(cls, actions=None, **initkwargs):
        """Async views on tracking's database threads; ingestion with a run token has a fast path.
        CSV export keeps Django's own handling (it streams from the request thread)."""
        view = super().as_view(actions, **initkwargs)
        if actions and "export" in actions.values():
            return view
        return fast.tracking_view(view, fast=fast.batches if actions == {"post": "batches"} else None)

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.action in LIGHT_ACTIONS:  # no summaries needed: no prefetch
            queryset = queryset.select_related(None).prefetch_related(None)
        if self.action == "list":
            queryset = runs_listed(queryset)
        return queryset

    def get_authenticators(self):
        return [RunTokenAuthentication(), *super().get_authenticators()]

    def initial(self, request, *args, **kwargs):
        header = get_authorization_header(request).split()
        if len(header) == 2 and header[1].startswith(RUN_TOKEN_PREFIX.encode()):
            APIView.initial(self, request, *args, **kwargs)  # authentication, permissions, throttling
            run = request.user.run
            if run.project.slug != kwargs.get(self.project_url_kwarg) or str(run.pk) != str(kwargs.get("pk")):
                raise exceptions.NotFound("Run not found.")
            if self.action not in RUN_TOKEN_ACTIONS:
                raise exceptions.PermissionDenied("A run token can only write metrics and params into its own run.")
            self.project, self.role = run.project, None
            return
        super().initial(request, *args, **kwargs)

    def get_serializer_class(self):
        if self.action == "retrieve":
            return RunDetailSerializer
        return RunSerializer

    @extend_schema(request=RunCreateSerializer, responses={201: RunCreatedSerializer, 200: RunCreatedSerializer, **ERRORS},
                   summary="Create a standalone run (idempotent on client_id); answers a write-only run token",
                   description="201 with a new run; 200 with the existing run when `client_id` names one.")
    def create(self, request, project=None):
        serializer = RunCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        run, created = run_create(project=self.project, name=data.get("name", ""), created_by=request.user,
                                  client_id=data.get("client_id"), params=data.get("params"))
        run.run_token = run_token_create(run=run)
        run = self._reload(run)
        return Response(RunCreatedSerializer(run).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def _reload(self, run):
        token = getattr(run, "run_token", None)
        run = self.get_queryset().prefetch_related(Prefetch("params", queryset=Param.objects.order_by("key"))).get(
            pk=run.pk)
        if token:
            run.run_token = token
        return run

    @extend_schema(responses={200: RunDetailSerializer, **ERRORS})
    def retrieve(self, request, project=None, pk=None):
        return Response(RunDetailSerializer(self._reload(self.get_object())).data)

    @extend_schema(responses={204: None, **ERRORS}, summary="Delete a run and its data")
    def destroy(self, request, project=None, pk=None):
        run_delete(run=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=BatchSerializer, responses={200: BatchResultSerializer, 413: DetailSerializer,
                                                       429: DetailSerializer, **ERRORS},
                   summary="Ingest a batch of metric points and params (thousands per request)")
    @action(detail=True, methods=["post"], parser_classes=[IngestJSONParser], throttle_classes=[IngestRateThrottle])
    def batches(self, request, project=None, pk=None):
        # The hot path: the run token already carries its run; no prefetching of summaries.
        token_run = getattr(request.user, "run", None) if isinstance(request.auth, RunToken) else None
        if token_run is None and not str(pk).isdigit():
            raise exceptions.NotFound("Run not found.")
        run = token_run or get_object_or_404(Run.objects.only("id", "project_id", "status"), project=self.project, pk=pk)
        batch = parse_batch(request.data, now=time.time())
        result = run_ingest(run=run, batch=batch)
        return Response({"points": result.points, "params": result.params, "duplicate": result.duplicate})

    @extend_schema(request=CheckpointReportSerializer, responses={201: CheckpointReportedSerializer, **ERRORS},
                   summary="Report a checkpoint the SDK saved (cairn.checkpoint.save)",
                   description="Accepts the run's write-only token, like batches. The run must belong to a "
                               "training job's attempt; the checkpoint shows on the workload's timeline.")
    @action(detail=True, methods=["post"])
    def checkpoints(self, request, project=None, pk=None):
        token_run = getattr(request.user, "run", None) if isinstance(request.auth, RunToken) else None
        run = token_run or self.get_object()
        serializer = CheckpointReportSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        checkpoint = run_checkpoint_report(run=run, **serializer.validated_data)
        return Response(CheckpointReportedSerializer(checkpoint).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=RunFinishSerializer, responses={200: RunSerializer, **ERRORS}, summary="Finish the run")
    @action(detail=True, methods=["post"])
    def finish(self, request, project=None, pk=None):
        serializer = RunFinishSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = run_finish(run=self.get_object(), status=serializer.validated_data["status"])
        return Response(RunSerializer(self._reload(run)).data)

    @extend_schema(
        parameters=[ModelRegisterQuerySerializer],
        request={"application/gzip": OpenApiTypes.BINARY, "application/x-tar": OpenApiTypes.BINARY,
                 "application/octet-stream": OpenApiTypes.BINARY},
        responses={201: ModelVersionSerializer, 413: DetailSerializer, 415: DetailSerializer, **ERRORS},
        summary="Register the run's output (a tar archive) as the next version of a model",
        description="`cairn.register_model(name, path)` in a job. The version is stored in the project's "
                    "artifact store with the run's params and metric summaries as lineage (docs/data.md).")
    @action(detail=True, methods=["post"], url_path="register-model", parser_classes=[ArchiveUploadParser])
    def register_model(self, request, project=None, pk=None):
        query = ModelRegisterQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        token_run = getattr(request.user, "run", None) if isinstance(request.auth, RunToken) else None
        run = token_run or self.get_object()
        archive = request.data
        if not hasattr(archive, "read"):
            raise exceptions.ParseError("Send the model as a tar archive (Content-Type: application/gzip).")
        summaries = run_summaries(runs=[run])[run.pk]
        version = model_version_register(
            project=run.project, name=query.validated_data["name"], archive=archive, run_id=run.pk,
            workload_id=run.workload_id, params=run_params(runs=[run])[run.pk],
            metrics={k: {"last": s["last"], "min": s["min"], "max": s["max"], "step": s["last_step"]}
                     for k, s in summaries.items()})
        return Response(ModelVersionSerializer(version).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[SeriesQuerySerializer], responses={200: OpenApiTypes.OBJECT, **ERRORS},
                   summary="One series, downsampled to max_points (buckets keep first/last/min/max)")
    @action(detail=True, methods=["get"])
    def series(self, request, project=None, pk=None):
        run = self.get_object()
        query = SeriesQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        return Response(series_read(run=run, **query.validated_data))

    @extend_schema(parameters=[PointsQuerySerializer], responses={200: OpenApiTypes.OBJECT, **ERRORS},
                   summary="One series at full resolution, paged by (step, id)")
    @action(detail=True, methods=["get"])
    def points(self, request, project=None, pk=None):
        run = self.get_object()
        query = PointsQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        data = query.validated_data
        return Response(points_page(run=run, key=data["key"], after_step=data.get("after_step"),
                                    after_id=data.get("after_id"), limit=data["limit"]))

    @extend_schema(parameters=[ExportQuerySerializer],
                   responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR), **ERRORS},
                   summary="Every point of the run as CSV (key, step, value, time)")
    @action(detail=True, methods=["get"])
    def export(self, request, project=None, pk=None):
        run = self.get_object()
        query = ExportQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        writer = csv.writer(_Echo())

        def rows():
            yield writer.writerow(["key", "step", "value", "time"])
            for row in csv_rows(run=run, keys=query.validated_data.get("keys")):
                yield writer.writerow(row)

        response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.csv"'
        return response

    @extend_schema(parameters=[CompareQuerySerializer], responses={200: OpenApiTypes.OBJECT, **ERRORS},
                   summary="Compare runs: params (only_differs), summaries, parallel coordinates, overlaid curves")
    @action(detail=False, methods=["get"])
    def compare(self, request, project=None):
        query = CompareQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        data = query.validated_data
        runs = list(self.get_queryset().filter(pk__in=data["runs"]).order_by("id"))
        missing = sorted(set(data["runs"]) - {r.pk for r in runs})
        if missing:
            raise exceptions.NotFound(f"Run(s) not found: {', '.join(map(str, missing))}.")
        return Response(runs_compare(runs=runs, only_differs=data["only_differs"], keys=data.get("keys") or [],
                                     max_points=data["max_points"]))
