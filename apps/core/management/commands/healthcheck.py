"""`manage.py healthcheck LOOP`: the health check of a long-running loop process.

Exits 0 while the loop's heartbeat (apps/core/heartbeat.py) is younger than --max-age seconds,
1 otherwise, saying why. docker-compose.yml and the Kubernetes manifests (platform/kubernetes/)
run it as the health check / liveness probe of the scheduler, reconciler, outbox relay,
telemetry collector, periodic-task runner, sweep driver and notebook culler."""
from django.core.management.base import BaseCommand, CommandError

from apps.core.heartbeat import heartbeat_age

LOOPS = ("scheduler", "reconciler", "reconciler-kubernetes", "outbox", "telemetry", "periodic", "sweeps", "culler")


class Command(BaseCommand):
    help = "Exit 0 if the named loop (scheduler, reconciler, outbox, telemetry, periodic, sweeps, culler) beat recently."
    requires_system_checks = []  # a probe: fast, and no reason to fail on a deployment warning

    def add_arguments(self, parser):
        parser.add_argument("loop", choices=LOOPS)
        parser.add_argument("--max-age", type=float, default=120.0,
                            help="seconds without a heartbeat after which the loop counts as stuck (default 120)")

    def handle(self, *args, loop: str, max_age: float, **options):
        age = heartbeat_age(loop)
        if age is None:
            raise CommandError(f"{loop}: no heartbeat yet (starting, or not running in this container)")
        if age > max_age:
            raise CommandError(f"{loop}: last heartbeat {age:.0f}s ago (more than {max_age:g}s): stuck")
        self.stdout.write(f"{loop}: ok (last heartbeat {age:.1f}s ago)")
