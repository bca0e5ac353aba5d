from .base import *  # noqa: F401,F403  (the settings module is the one place star imports are allowed)
