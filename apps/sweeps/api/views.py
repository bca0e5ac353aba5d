from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.projects.api.base import ProjectScopedViewSet
from apps.projects.choices import Action
from apps.workloads.api.views import ERRORS

from ..choices import Direction, TrialStatus
from ..models import Sweep, Trial
from ..selectors import trial_counts, trial_runs
from ..services import sweep_create, sweep_delete, sweep_stop
from ..study import param_importances
from .serializers import ImportanceSerializer, SweepCreateSerializer, SweepSerializer, TrialSerializer


def _bests(sweeps: list[Sweep]) -> dict[int, dict]:
    """sweep id -> its best succeeded trial, for a page of sweeps in two queries."""
    trials = list(Trial.objects.filter(sweep__in=sweeps, status=TrialStatus.SUCCEEDED, objective__isnull=False)
                  .only("id", "sweep_id", "number", "objective", "params", "workload_id"))
    runs = trial_runs(trials)
    direction = {s.pk: s.direction for s in sweeps}
    best: dict[int, Trial] = {}
    for t in trials:
        current = best.get(t.sweep_id)
        sign = 1 if direction[t.sweep_id] == Direction.MAXIMIZE else -1
        if current is None or (sign * t.objective, -t.number) > (sign * current.objective, -current.number):
            best[t.sweep_id] = t
    return {sid: {"number": t.number, "objective": t.objective, "params": t.params, "run": runs.get(t.pk),
                  "workload": t.workload_id} for sid, t in best.items()}


class SweepViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ProjectScopedViewSet):
    """Hyper-parameter sweeps of the project (docs/sweeps.md): create, list, inspect, stop, delete;
    their trials and Optuna's parameter importance."""

    queryset = Sweep.objects.select_related("project", "pool", "created_by")
    serializer_class = SweepSerializer
    ordering_fields = ["created_at", "name", "status"]
    ordering = ["-created_at", "-id"]
    required_actions = {"create": Action.SUBMIT, "stop": Action.SUBMIT, "destroy": Action.SUBMIT}
    filterset_fields = ["status"]

    def get_serializer_class(self):
        if self.action == "create":
            return SweepCreateSerializer
        if self.action == "trials":
            return TrialSerializer
        return SweepSerializer

    def _context(self, sweeps: list[Sweep]) -> dict:
        return {**self.get_serializer_context(), "counts": trial_counts(sweeps), "best": _bests(sweeps)}

    def list(self, request, project=None):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(SweepSerializer(page, many=True, context=self._context(page)).data)

    def retrieve(self, request, project=None, pk=None):
        sweep = self.get_object()
        return Response(SweepSerializer(sweep, context=self._context([sweep])).data)

    @extend_schema(request=SweepCreateSerializer, responses={201: SweepSerializer, **ERRORS},
                   summary="Create a sweep; the driver starts its trials")
    def create(self, request, project=None):
        serializer = SweepCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        budget = data["budget"]
        early = data.get("early_stopping") or {}
        with transaction.atomic():
            sweep = sweep_create(
                project=self.project, created_by=request.user, name=data["name"], template=data["template"],
                space=data["space"], objective_key=data["objective"]["metric"],
                direction=data["objective"]["direction"], algorithm=data["algorithm"],
                max_trials=budget.get("max_trials"), max_gpu_hours=budget.get("max_gpu_hours"),
                max_concurrent=data["max_concurrent"], priority=data["priority"], seed=data.get("seed"),
                min_resource=early.get("min_resource", 1), reduction_factor=early.get("reduction_factor", 3),
            )
        return Response(SweepSerializer(sweep, context=self._context([sweep])).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={202: SweepSerializer, **ERRORS},
                   summary="Stop: no more trials; its running trials are stopped")
    @action(detail=True, methods=["post"])
    def stop(self, request, project=None, pk=None):
        sweep = sweep_stop(sweep=self.get_object(), user=request.user)
        return Response(SweepSerializer(sweep, context=self._context([sweep])).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={204: None, **ERRORS},
                   summary="Delete an ended sweep (409 while it runs or stops: stop it first)",
                   description="Removes the sweep, its trial list and Optuna's study. The trials' training "
                               "jobs and their runs (params, metrics) are kept.")
    def destroy(self, request, project=None, pk=None):
        sweep_delete(sweep=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses={200: TrialSerializer(many=True), **ERRORS}, summary="The sweep's trials, by number")
    @action(detail=True, methods=["get"])
    def trials(self, request, project=None, pk=None):
        sweep = self.get_object()
        page = self.paginate_queryset(Trial.objects.filter(sweep=sweep).select_related("workload").order_by("number"))
        return self.get_paginated_response(TrialSerializer(page, many=True, context={"runs": trial_runs(page)}).data)

    @extend_schema(responses={200: ImportanceSerializer, **ERRORS},
                   summary="Parameter importance (Optuna's, over the completed trials)")
    @action(detail=True, methods=["get"])
    def importance(self, request, project=None, pk=None):
        sweep = self.get_object()
        completed = Trial.objects.filter(sweep=sweep, status=TrialStatus.SUCCEEDED).count()
        return Response({"importances": param_importances(sweep, completed=completed), "completed_trials": completed})
