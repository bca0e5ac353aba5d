"""The scheduler's settings are checked at startup: out of range is an error naming the variable."""
import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from apps.scheduling.checks import scheduler_settings


def test_the_default_settings_pass():
    assert scheduler_settings() == []


@pytest.mark.parametrize(("key", "value", "variable"), [
    ("GPU_NODE_RESERVE", 1.5, "CAIRN_GPU_NODE_RESERVE"),
    ("GPU_NODE_RESERVE", -0.1, "CAIRN_GPU_NODE_RESERVE"),
    ("GPU_NODE_RESERVE", float("nan"), "CAIRN_GPU_NODE_RESERVE"),
    ("STARVATION_SECONDS", -1, "CAIRN_STARVATION_SECONDS"),
    ("REPREEMPT_MIN_RUNTIME_SECONDS", float("inf"), "CAIRN_REPREEMPT_MIN_RUNTIME_SECONDS"),
    ("STOP_GRACE_SECONDS", "soon", "CAIRN_STOP_GRACE_SECONDS"),
    ("SCHEDULER_INTERVAL", 0, "CAIRN_SCHEDULER_INTERVAL"),
    ("SERVICE_HALF_LIFE_SECONDS", 0, "CAIRN_SERVICE_HALF_LIFE_SECONDS"),
    ("SERVICE_HALF_LIFE_SECONDS", -3600, "CAIRN_SERVICE_HALF_LIFE_SECONDS"),
    ("TIMESLICE_SECONDS", -1, "CAIRN_TIMESLICE_SECONDS"),
])
def test_a_value_out_of_range_is_an_error_naming_its_variable(settings, key, value, variable):
    settings.CAIRN = {**settings.CAIRN, key: value}
    errors = scheduler_settings()
    assert len(errors) == 1 and errors[0].msg.startswith(f"{variable}=") and errors[0].id.startswith("cairn.E")
    with pytest.raises(SystemCheckError, match=variable):
        call_command("check")


@pytest.mark.parametrize(("key", "value"), [("GPU_NODE_RESERVE", 0), ("GPU_NODE_RESERVE", 1),
                                            ("STARVATION_SECONDS", 0), ("SCHEDULER_INTERVAL", 0.05),
                                            ("SERVICE_HALF_LIFE_SECONDS", 0.5), ("TIMESLICE_SECONDS", 0)])
def test_the_edges_of_each_range_are_accepted(settings, key, value):
    settings.CAIRN = {**settings.CAIRN, key: value}
    assert scheduler_settings() == []
