"""All API routes under /api/v1/. Project-scoped routes live under projects/<project>/."""
from django.urls import include, path

urlpatterns = [
]
