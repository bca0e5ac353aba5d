from django.urls import path

from .consumers import ProjectEventsConsumer

websocket_urlpatterns = [
    path("ws/projects/<str:project>/events/", ProjectEventsConsumer.as_asgi()),
]
