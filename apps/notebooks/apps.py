from django.apps import AppConfig


class NotebooksConfig(AppConfig):
    name = "apps.notebooks"
    label = "notebooks"
