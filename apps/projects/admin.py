"""Admin for projects and their members, and the memberships inline on a user's admin page (the
UserAdmin of apps.accounts, registered again here with it: accounts does not import projects)."""
from django.apps import apps as django_apps
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest

from apps.accounts.admin import UserAdmin as AccountsUserAdmin
from apps.accounts.models import User
from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core.admin import ServiceDeleteMixin

from .choices import Role
from .models import Membership, Project
from .services import membership_record, project_delete, project_update


def _count(model, **filters) -> Coalesce:
    """Rows of `model` per project, as a subquery (no join fan-out when counting two relations)."""
    rows = model.objects.filter(project=OuterRef("pk"), **filters).order_by().values("project")
    return Coalesce(Subquery(rows.annotate(n=Count("pk")).values("n")[:1], output_field=IntegerField()), Value(0))


class OwnersFormSet(BaseInlineFormSet):
    """The rule of the membership services, for the admin: a project keeps at least one owner."""

    def clean(self) -> None:
        super().clean()
        kept = [
            form.cleaned_data
            for form in self.forms
            if getattr(form, "cleaned_data", None) and form.cleaned_data.get("user") and not form.cleaned_data.get("DELETE")
        ]
        if kept and not any(data.get("role") == Role.OWNER for data in kept):
            raise ValidationError("A project must keep at least one owner.")


class MembershipAuditMixin:
    """Membership inlines save rows directly (not through the membership services): record each
    addition, role change and removal in the audit log, in the admin's transaction."""

    def save_formset(self, request: HttpRequest, form, formset, change: bool) -> None:
        if formset.model is not Membership:
            return super().save_formset(request, form, formset, change)
        # What each existing row said before the save (the inline's own foreign key is not a form field).
        before = {
            id(f.instance): (f.initial.get("project", f.instance.project_id), f.initial.get("user", f.instance.user_id),
                             f.initial.get("role", f.instance.role))
            for f in formset.initial_forms
        }
        super().save_formset(request, form, formset, change)
        removed = [before[id(m)] for m in formset.deleted_objects]
        added = list(formset.new_objects)
        for membership, _fields in formset.changed_objects:
            project_id, user_id, role = before[id(membership)]
            if (project_id, user_id) != (membership.project_id, membership.user_id):  # now someone else's row
                removed.append((project_id, user_id, role))
                added.append(membership)
            elif role != membership.role:
                membership_record(action=AuditAction.MEMBERSHIP_ROLE_CHANGE, project=membership.project,
                                  user=membership.user, details={"from": role, "to": membership.role})
        projects = Project.objects.in_bulk({project_id for project_id, _, _ in removed})
        users = User.objects.in_bulk({user_id for _, user_id, _ in removed})
        for project_id, user_id, role in removed:
            membership_record(action=AuditAction.MEMBERSHIP_REMOVE, project=projects.get(project_id),
                              user=users.get(user_id), details={"role": role})
        for membership in added:
            membership_record(action=AuditAction.MEMBERSHIP_ADD, project=membership.project,
                              user=membership.user, details={"role": membership.role})


class MembershipInline(admin.TabularInline):
    model = Membership
    formset = OwnersFormSet
    fields = ["user", "role", "created_at"]
    readonly_fields = ["created_at"]
    autocomplete_fields = ["user"]
    extra = 0


@admin.register(Project)
class ProjectAdmin(MembershipAuditMixin, ServiceDeleteMixin, admin.ModelAdmin):
    list_display = ["slug", "name", "member_count", "workload_count", "created_at"]
    search_fields = ["slug", "name"]
    readonly_fields = ["created_at"]
    fields = ["slug", "name", "description", "created_at"]
    inlines = [MembershipInline]
    delete_service = staticmethod(lambda project: project_delete(project=project))

    def get_queryset(self, request: HttpRequest) -> QuerySet[Project]:
        return super().get_queryset(request).annotate(
            # By name: projects sits below workloads and does not import it.
            member_total=_count(Membership), workload_total=_count(django_apps.get_model("workloads", "Workload"))
        )

    @admin.display(description="members", ordering="member_total")
    def member_count(self, obj: Project) -> int:
        return obj.member_total

    @admin.display(description="workloads", ordering="workload_total")
    def workload_count(self, obj: Project) -> int:
        return obj.workload_total

    def save_model(self, request, obj: Project, form, change: bool) -> None:
        if change:
            changed = [name for name in form.changed_data if name in ("slug", "name", "description")]
            if changed:
                project_update(project=obj, **{name: getattr(obj, name) for name in changed})
        else:
            # New projects from the admin get their owners from the membership inline
            # (project_create makes the *requesting* user owner, which is not what staff want here).
            obj.save()
            audit_record(action=AuditAction.PROJECT_CREATE, project=obj, target=obj)


class UserMembershipInline(admin.TabularInline):
    model = Membership
    fk_name = "user"
    fields = ["project", "role", "created_at"]
    readonly_fields = ["created_at"]
    autocomplete_fields = ["project"]
    extra = 0
    verbose_name = "project membership"


class UserAdmin(MembershipAuditMixin, AccountsUserAdmin):
    """accounts' user admin, with the user's project memberships (each change audited)."""

    inlines = [*AccountsUserAdmin.inlines, UserMembershipInline]


admin.site.unregister(User)
admin.site.register(User, UserAdmin)
