"""Who a Cairn process is, in a form another process can check is still alive: the owner of a
launch claim and of the replicas it started (apps.backends.services), and of the local
backend's replica supervisors."""
from __future__ import annotations

import socket

import psutil

_CREATE_TIME_TOLERANCE = 0.05  # seconds; psutil start times of one process agree far closer


def process_identity() -> dict:
    """Who this Cairn process is."""
    me = psutil.Process()
    return {"pid": me.pid, "create_time": me.create_time(), "host": socket.gethostname()}


def find_process(pid: int | None, create_time: float | None) -> psutil.Process | None:
    """The live (non-zombie) process with this pid *and* start time, or None."""
    if not pid or create_time is None:
        return None
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - create_time) > _CREATE_TIME_TOLERANCE:
            return None  # the pid was reused by someone else
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.Error:
        return None


def identity_alive(identity: dict | None) -> bool:
    if not identity:
        return False
    if identity.get("host") not in (None, socket.gethostname()):
        return False
    return find_process(identity.get("pid"), identity.get("create_time")) is not None
