"""What the local backend checks and says once, when a server process starts.

Kept apart from sandbox.py so that the modules it reports on (netns, limits, seccomp) may each
import sandbox at their top without a cycle. It logs through sandbox's logger: operators filter
the local backend's start-up lines by that name.
"""

from __future__ import annotations

from . import limits, netns, sandbox, seccomp


def log_start_up_warning() -> None:
    logger = sandbox.logger
    iso = sandbox.isolation()
    if iso.isolated and iso.level != sandbox.RUN_USER:
        logger.info("local backend: %s", iso.describe())
    else:
        logger.warning("local backend: %s%s", iso.describe(), f" ({iso.problem})" if iso.problem else "")
    net = netns.network()  # a network namespace per workload
    (logger.info if net.available else logger.warning)("local backend: %s", net.describe())
    netns.sweep(force=True)  # namespaces a previous run left behind
    logger.info("local backend: %s", limits.describe())
    if iso.level in (sandbox.BWRAP_ROOT, sandbox.BWRAP):
        seccomp.program()  # built at start: a host without libseccomp is told now, not at the first launch
