"""ASGI entry point: HTTP through Django, websockets through Channels (authenticated).

Training jobs' metric batches (run-token POSTs to .../runs/<id>/batches/) are answered ahead of
Django's request cycle by apps.tracking.asgi, with the same checks and answers as the Django
view; deployments are called through apps.deployments.gateway (/serve/<project>/<name>/...); notebooks
are opened through apps.notebooks.proxy (/nb/<project>/<id>/..., HTTP and websockets);
everything else goes to Django unchanged.

Websockets: apps.projects.wsauth.OriginGate honours the session cookie only from the site's own pages
(ALLOWED_HOSTS) and lets token-signed clients in from anywhere; each consumer then signs the socket
in and closes it with a documented code when refused (docs/live.md). The server's access log
lines pass through apps.core.logsafe, which blanks tokens in query strings."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from apps.core import logsafe  # noqa: E402
from apps.core.checks import check_at_start  # noqa: E402
from apps.core.proxy import close_pools  # noqa: E402
from apps.deployments.gateway import with_gateway  # noqa: E402
from apps.notebooks.proxy import with_notebook_proxy  # noqa: E402
from apps.portal.routing import websocket_urlpatterns  # noqa: E402
from apps.projects.wsauth import OriginGate  # noqa: E402
from apps.tracking.asgi import with_ingest_fast_path  # noqa: E402

logsafe.install()
check_at_start()  # the public SECRET_KEY stops server mode; passwordless PostgreSQL/Redis are logged

# /nb/...: the notebook proxy (apps/notebooks/proxy.py), HTTP and websockets, with its own sign-in checks.
http_app, websocket_app = with_notebook_proxy(
    with_gateway(with_ingest_fast_path(django_asgi_app)),  # /serve/...: the deployment gateway
    OriginGate(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
)


async def lifespan(scope, receive, send):
    """ASGI lifespan: at shutdown, close the gateway's and the notebook proxy's upstream connection pools."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await close_pools()
            await send({"type": "lifespan.shutdown.complete"})
            return


application = ProtocolTypeRouter({"http": http_app, "websocket": websocket_app, "lifespan": lifespan})
