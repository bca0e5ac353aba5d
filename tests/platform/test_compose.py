"""docker-compose.yml runs every process server mode needs, each with a health check, and
docs/operations.md lists them (issue 25, item 1). The list of processes is derived from the code:
every long-running management command (`run_*`, except `run_embedded`, which is all of them in
one), the Celery worker and the web server. Adding a `run_*` command without a compose service,
a health check and a line in the docs fails here."""
import re
from pathlib import Path

import yaml

from apps.core.management.commands.healthcheck import LOOPS

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()


def loop_commands() -> set[str]:
    """`run_*` management commands of every app: the long-running loops."""
    names = {path.stem for path in ROOT.glob("apps/*/management/commands/run_*.py")}
    return names - {"run_embedded"}


def _cairn_services() -> dict[str, dict]:
    return {name: s for name, s in SERVICES.items() if s.get("image") == "cairn:dev"}


def _command(service: dict) -> list[str]:
    command = service.get("command") or []
    return command if isinstance(command, list) else command.split()


def test_the_loops_are_the_ones_we_know():
    assert loop_commands() == {"run_scheduler", "run_reconciler", "run_outbox", "run_telemetry", "run_periodic", "run_sweeps", "run_culler"}


def test_every_loop_has_a_service():
    commands = {word for s in _cairn_services().values() for word in _command(s)}
    missing = loop_commands() - commands
    assert not missing, f"docker-compose.yml runs no service with {sorted(missing)}"
    assert any(_command(s)[:2] == ["celery", "-A"] and "worker" in _command(s) for s in SERVICES.values())
    assert any(_command(s)[:1] == ["uvicorn"] for s in SERVICES.values())


def test_every_cairn_process_has_a_health_check():
    for name, service in _cairn_services().items():
        if name == "migrate":  # runs once; the others wait for it to complete
            assert service["restart"] == "no"
            continue
        test = (service.get("healthcheck") or {}).get("test")
        assert test, f"service {name} has no health check"
        command = _command(service)
        if len(command) >= 3 and command[2] in loop_commands():
            loop = command[2].removeprefix("run_")
            assert loop in LOOPS, f"`manage.py healthcheck` does not know the {loop} loop"
            assert test[-2:] == ["healthcheck", loop], f"service {name} checks {test}, not its own loop"


def test_two_schedulers_one_leader():
    schedulers = [n for n, s in _cairn_services().items() if "run_scheduler" in _command(s)]
    assert len(schedulers) >= 2, "one scheduler is no standby"


def test_the_telemetry_collector_samples_the_machine_the_replicas_run_on():
    assert SERVICES["telemetry"]["pid"] == "service:worker"
    assert SERVICES["telemetry"]["hostname"] == SERVICES["worker"]["hostname"]


def test_operations_doc_lists_every_service_and_loop():
    for name in SERVICES:
        assert re.search(rf"`{re.escape(name)}`", OPERATIONS), f"docs/operations.md does not mention service `{name}`"
    for command in loop_commands():
        assert command in OPERATIONS, f"docs/operations.md does not mention {command}"


def _env(service: dict) -> dict:
    return service.get("environment") or {}


def test_the_web_service_reaches_notebooks_the_worker_starts():
    """Local notebooks run in the worker container and the web container's proxy opens them: they
    must listen on the worker's address on the compose network (its service name), not its loopback,
    and the web container must be on that network. Their ports are not published to the host."""
    worker, web = SERVICES["worker"], SERVICES["web"]
    host = _env(worker).get("CAIRN_NOTEBOOK_BIND_HOST")
    assert host == "worker", f"the worker's notebooks listen on {host!r}: out of the web container's reach"
    assert "network_mode" not in web and "network_mode" not in worker  # both on the compose network
    assert set(web.get("networks") or ["default"]) & set(worker.get("networks") or ["default"])
    assert not worker.get("ports"), "notebook ports must not be published beyond the compose network"
    # The culler reads activity where the proxy does.
    culler = SERVICES["culler"]
    assert culler.get("network_mode") == "service:worker" or _env(culler).get("CAIRN_NOTEBOOK_BIND_HOST") == host
