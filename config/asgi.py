"""ASGI entry point: HTTP through Django, websockets through Channels (authenticated).

Training jobs' metric batches (run-token POSTs to .../runs/<id>/batches/) are answered ahead of
Django's request cycle by apps.tracking.asgi, with the same checks and answers as the Django
view; deployments are called through apps.deployments.gateway (/serve/<project>/<name>/...);
everything else goes to Django unchanged."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from apps.core.routing import websocket_urlpatterns  # noqa: E402
from apps.deployments.gateway import with_gateway  # noqa: E402
from apps.tracking.asgi import with_ingest_fast_path  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": with_gateway(with_ingest_fast_path(django_asgi_app)),  # /serve/...: the deployment gateway
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
