from django.db import models


class OutboxMessage(models.Model):
    """A task to send, written in the same transaction as the change that needs it.

    The relay (`manage.py run_outbox`, or the embedded loop) publishes unsent rows to Celery,
    so a commit made while the broker was down is still dispatched once it is back.
    """

    topic = models.CharField(max_length=64)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["sent_at", "id"], name="outbox_unsent_idx")]

    def __str__(self) -> str:
        return f"{self.topic} {self.payload}"
