"""Notebook choices: the IDE a notebook runs, and the limits of idle reclaim."""
from django.db import models


class IDE(models.TextChoices):
    JUPYTERLAB = "jupyterlab", "JupyterLab"
    VSCODE = "vscode", "VS Code (code-server)"


MAX_IDLE_TIMEOUT_SECONDS = 30 * 86400
IDLE_RECLAIMED = "IdleReclaimed"  # the status reason of a notebook the culler stopped
