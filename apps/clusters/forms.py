"""The admin's form for a cluster: its config is checked by its backend's declared spec
(BackendSpec.check_config), so a Slurm cluster is registered in the admin with a config the
backend can use, or refused with the backend's words."""
from django import forms

from .backends import backend_spec
from .models import Cluster


class ClusterForm(forms.ModelForm):
    class Meta:
        model = Cluster
        fields = ["name", "backend", "config"]

    def clean(self):
        data = super().clean()
        backend = data.get("backend")
        if backend:
            try:
                data["config"] = backend_spec(backend).check_config(dict(data.get("config") or {}))
            except ValueError as exc:
                self.add_error("config", str(exc))
        return data
