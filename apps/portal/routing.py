from django.urls import path

from apps.tracking.consumers import TrackingLiveConsumer

from .consumers import ProjectEventsConsumer, ProjectLiveConsumer

websocket_urlpatterns = [
    path("ws/projects/<str:project>/events/", ProjectEventsConsumer.as_asgi()),
    path("ws/projects/<str:project>/live/", ProjectLiveConsumer.as_asgi()),
    path("ws/projects/<str:project>/runs/live/", TrackingLiveConsumer.as_asgi()),
    path("ws/projects/<str:project>/runs/<int:run>/live/", TrackingLiveConsumer.as_asgi()),
]
