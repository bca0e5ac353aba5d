"""Admin for quotas (edited in GPUs, cores and GiB; usage shown beside each) and the usage ledger."""
from decimal import ROUND_HALF_UP, Decimal

from django import forms
from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.http import HttpRequest

from apps.core.admin import ReadOnlyAdmin, ServiceDeleteMixin, cores, gpus, memory

from .models import Quota, UsageRecord
from .selectors import quota_beyond_capacity, quota_usage, wait_kind_labels
from .services import quota_create, quota_delete, quota_update

MILLI = Decimal(1000)
MIB_PER_GIB = Decimal(1024)


def _amount(**kwargs) -> forms.DecimalField:
    return forms.DecimalField(min_value=0, max_digits=12, decimal_places=3, **kwargs)


class QuotaForm(forms.ModelForm):
    """Quotas are stored in milli-GPU, milli-CPU and MiB; people think in GPUs, cores and GiB."""

    nominal_gpus = _amount(label="Nominal GPUs", initial=0, help_text="Guaranteed GPUs, e.g. 8 or 0.5.")
    nominal_cpus = _amount(label="Nominal CPU cores", initial=0)
    nominal_memory_gib = _amount(label="Nominal memory (GiB)", initial=0)
    borrowing_limit_gpus = _amount(
        label="Borrowing limit (GPUs)", required=False,
        help_text="How many GPUs beyond nominal this project may borrow from others' unused quota. Empty: no limit.",
    )
    lending_limit_gpus = _amount(
        label="Lending limit (GPUs)", required=False,
        help_text="How many of this project's unused GPUs others may borrow. Empty: no limit.",
    )

    # form field -> (model field, units per form unit)
    UNITS = {
        "nominal_gpus": ("nominal_gpu_milli", MILLI),
        "nominal_cpus": ("nominal_cpu_milli", MILLI),
        "nominal_memory_gib": ("nominal_memory_mb", MIB_PER_GIB),
        "borrowing_limit_gpus": ("borrowing_limit_gpu_milli", MILLI),
        "lending_limit_gpus": ("lending_limit_gpu_milli", MILLI),
    }

    class Meta:
        model = Quota
        fields = ["project", "pool", "gpu_hour_budget", "budget_period"]
        help_texts = {"gpu_hour_budget": "GPU-hours per period; jobs that would exceed it wait. Empty: no budget."}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            for name, (field, per) in self.UNITS.items():
                value = getattr(self.instance, field)
                self.initial[name] = None if value is None else _shown(Decimal(value) / per)

    FORM_FIELD = {"nominal_gpu_milli": "nominal_gpus", "nominal_cpu_milli": "nominal_cpus",
                  "nominal_memory_mb": "nominal_memory_gib"}

    def clean(self):
        """The same refusal as the API's: nominal beyond what the pool's nodes hold together."""
        cleaned = super().clean()
        pool = cleaned.get("pool") or (self.instance.pool if self.instance.pk else None)
        if pool is not None and not self.errors:
            values = self.stored_values()
            beyond = quota_beyond_capacity(pool=pool, gpu_milli=values["nominal_gpu_milli"],
                                           cpu_milli=values["nominal_cpu_milli"], memory_mb=values["nominal_memory_mb"])
            for field, message in beyond.items():
                self.add_error(self.FORM_FIELD[field], message)
        return cleaned

    def stored_values(self) -> dict:
        """The cleaned amounts in the model's units. A field left as shown keeps the stored value
        exactly: 24,105 MiB is shown as 23.54 GiB (three decimals fit the field) and saved back as
        24,105 MiB, not 23.54 x 1024."""
        values = {}
        for name, (field, per) in self.UNITS.items():
            if self.instance.pk and name not in self.changed_data:
                values[field] = getattr(self.instance, field)
                continue
            value = self.cleaned_data.get(name)
            values[field] = None if value is None else int((value * per).to_integral_value())
        return values


def _shown(amount: Decimal) -> Decimal:
    """At most the three decimals the form accepts (rounded half up), without trailing zeros."""
    shown = amount.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)
    return shown.quantize(Decimal(1)) if shown == shown.to_integral_value() else shown.normalize()


class QuotaChangeList(ChangeList):
    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        # One batch for the whole page, attached to the rows the page shows.
        usage = quota_usage(quotas=self.result_list)
        for quota in self.result_list:
            quota.usage = usage.get(quota.pk)


@admin.register(Quota)
class QuotaAdmin(ServiceDeleteMixin, admin.ModelAdmin):
    form = QuotaForm
    # Seven columns, so the list fits a 1366-pixel screen beside its filters (it had eleven, and
    # the last ones ran off the right edge); templates/admin/quotas/quota/change_list.html lets
    # long titles wrap.
    list_display = ["project", "pool", "nominal", "sharing", "allocated", "queued", "gpu_hours_used"]
    list_filter = ["pool", "budget_period"]
    list_select_related = ["project", "pool"]
    search_fields = ["project__slug", "project__name"]
    autocomplete_fields = ["project"]
    readonly_fields = ["usage_now", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["project", "pool"]}),
        ("Guaranteed (nominal)", {"fields": ["nominal_gpus", "nominal_cpus", "nominal_memory_gib"]}),
        ("Sharing", {"fields": ["borrowing_limit_gpus", "lending_limit_gpus"]}),
        ("Budget", {"fields": ["gpu_hour_budget", "budget_period"]}),
        ("Usage", {"fields": ["usage_now", "created_at", "updated_at"]}),
    ]
    delete_service = staticmethod(lambda quota: quota_delete(quota=quota))

    def get_changelist(self, request: HttpRequest, **kwargs):
        return QuotaChangeList

    def get_readonly_fields(self, request: HttpRequest, obj: Quota | None = None) -> list[str]:
        # A quota belongs to one project on one pool for life; make a new one to move it.
        fields = list(super().get_readonly_fields(request, obj))
        return ["project", "pool", *fields] if obj is not None else fields

    def save_model(self, request: HttpRequest, obj: Quota, form: QuotaForm, change: bool) -> None:
        fields = {"gpu_hour_budget": obj.gpu_hour_budget, "budget_period": obj.budget_period, **form.stored_values()}
        if change:
            quota_update(quota=obj, **fields)
        else:
            created = quota_create(project=obj.project, pool=obj.pool, **fields)
            obj.pk = created.pk  # the admin logs and redirects with `obj`
            obj.refresh_from_db()

    # ---- columns ------------------------------------------------------------------------------

    @admin.display(description="nominal (guaranteed)", ordering="nominal_gpu_milli")
    def nominal(self, obj: Quota) -> str:
        return (f"{gpus(obj.nominal_gpu_milli)} GPU · {cores(obj.nominal_cpu_milli)} CPU · "
                f"{memory(obj.nominal_memory_mb)}")

    @admin.display(description="borrow / lend ≤ (GPUs)")
    def sharing(self, obj: Quota) -> str:
        return f"borrow {gpus(obj.borrowing_limit_gpu_milli)} · lend {gpus(obj.lending_limit_gpu_milli)}"

    def budget(self, obj: Quota) -> str:
        if obj.gpu_hour_budget is None:
            return "—"
        return f"{obj.gpu_hour_budget.normalize():f} GPU-h / {obj.get_budget_period_display().lower()}"

    @admin.display(description="allocated now")
    def allocated(self, obj: Quota) -> str:
        usage = self._usage(obj)
        if usage is None:
            return "—"
        return (
            f"{gpus(usage['allocated_gpu_milli'])} / {gpus(obj.nominal_gpu_milli)} GPU · "
            f"{cores(usage['allocated_cpu_milli'])} / {cores(obj.nominal_cpu_milli)} CPU · "
            f"{memory(usage['allocated_memory_mb'])} / {memory(obj.nominal_memory_mb)}"
        )

    @admin.display(description="queued, waiting on")
    def queued(self, obj: Quota) -> str:
        usage = self._usage(obj)
        if not usage or not usage["waiting"]:
            return "—"
        asked = _asks(usage["queued_gpu_milli"], usage["queued_cpu_milli"], usage["queued_memory_mb"])
        waits = "; ".join(
            f"{w['workloads']} on {wait_kind_labels.get(w['waiting_on'], w['waiting_on'])}"
            + (f" ({', '.join(w['resources'])})" if w["resources"] else "")
            for w in usage["waiting"])
        return f"{asked}: {waits}"

    @admin.display(description="GPU-hours / budget", ordering="gpu_hour_budget")
    def gpu_hours_used(self, obj: Quota) -> str:
        usage = self._usage(obj)
        if usage is None:
            return "—"
        used = Decimal(str(usage["gpu_hours_this_period"])).quantize(Decimal("0.01"))
        period = obj.get_budget_period_display().lower()
        if obj.gpu_hour_budget is None:
            return f"{used} this {period} (no budget)"
        budget = obj.gpu_hour_budget
        share = f" ({used / budget:.0%})" if budget else ""
        return f"{used} / {budget.normalize():f}{share} GPU-h / {period}"

    @admin.display(description="usage")
    def usage_now(self, obj: Quota) -> str:
        if obj.pk is None:
            return "—"
        return (f"Allocated now: {self.allocated(obj)}. Queued: {self.queued(obj)}. "
                f"GPU-hours this period: {self.gpu_hours_used(obj)}. Budget: {self.budget(obj)}.")

    @staticmethod
    def _usage(obj: Quota) -> dict | None:
        """Usage computed for the changelist page in one batch, or for this one quota (change form)."""
        if not hasattr(obj, "usage"):
            obj.usage = quota_usage(quotas=[obj]).get(obj.pk) if obj.pk else None
        return obj.usage


def _asks(gpu_milli: int, cpu_milli: int, memory_mb: int) -> str:
    parts = [f"{gpus(gpu_milli)} GPU"] if gpu_milli else []
    if cpu_milli:
        parts.append(f"{cores(cpu_milli)} CPU")
    if memory_mb:
        parts.append(memory(memory_mb))
    return " · ".join(parts) or "nothing"


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = ["started_at", "ended_at", "project", "pool", "workload", "attempt", "gpu", "cpu", "mem",
                    "gpu_hours"]
    list_filter = ["pool", "project"]
    list_select_related = ["project", "pool", "workload__project"]
    search_fields = ["project__slug", "workload__name"]
    date_hierarchy = "started_at"

    @admin.display(description="GPUs", ordering="gpu_milli")
    def gpu(self, obj: UsageRecord) -> str:
        return gpus(obj.gpu_milli)

    @admin.display(description="CPU cores", ordering="cpu_milli")
    def cpu(self, obj: UsageRecord) -> str:
        return cores(obj.cpu_milli)

    @admin.display(description="memory", ordering="memory_mb")
    def mem(self, obj: UsageRecord) -> str:
        return memory(obj.memory_mb)

    @admin.display(description="GPU-hours")
    def gpu_hours(self, obj: UsageRecord) -> str:
        from django.utils import timezone

        end = obj.ended_at or timezone.now()
        hours = obj.gpu_milli / 1000 * max((end - obj.started_at).total_seconds(), 0) / 3600
        return f"{hours:.2f}" + ("" if obj.ended_at else " (open)")
