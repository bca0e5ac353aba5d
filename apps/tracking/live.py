"""Coalescing of live tracking events for one websocket subscription. Pure (no I/O).

Events arrive as fast as batches are ingested; a subscription sends at most N frames per
second, each carrying everything that arrived since the previous frame. What waits is bounded:
beyond `max_points` buffered points the oldest are dropped and the next frame says how many
(`dropped`), so a slow client costs bounded memory and can refetch the range over HTTP."""
from __future__ import annotations

from collections import deque


class Coalescer:
    def __init__(self, *, max_points: int):
        self.max_points = max_points
        self.points: dict[str, deque] = {}  # key -> deque of [step, value, time]
        self.count = 0
        self.latest: dict[int, dict[str, list]] = {}  # project view: run -> key -> [step, value, time]
        self.statuses: dict[int, str] = {}
        self.dropped = 0

    def __bool__(self) -> bool:
        return bool(self.count or self.latest or self.statuses)

    def add(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "run.metrics":
            for key, rows in event["points"].items():
                self.points.setdefault(key, deque()).extend(rows)
                self.count += len(rows)
            self._trim()
        elif kind == "run.latest":  # one run ("run", "latest") or several gathered ("runs": {"7": latest})
            gathered = event.get("runs") or {event["run"]: event["latest"]}
            for run, latest in gathered.items():
                mine = self.latest.setdefault(int(run), {})
                for key, row in latest.items():
                    if key not in mine or row[0] >= mine[key][0]:
                        mine[key] = row
            if sum(len(v) for v in self.latest.values()) > self.max_points:  # absurdly many keys: keep newest runs
                oldest = next(iter(self.latest))
                self.dropped += len(self.latest.pop(oldest))
        elif kind == "run.status":
            self.statuses[event["run"]] = event["status"]

    def _trim(self) -> None:
        while self.count > self.max_points:
            largest = max(self.points.values(), key=len)
            excess = min(len(largest), self.count - self.max_points)
            for _ in range(excess):
                largest.popleft()
            self.count -= excess
            self.dropped += excess

    def take(self, run_id: int | None) -> list[dict]:
        """The frames to send now (at most one per kind), and reset."""
        frames = []
        if self.count:
            frame = {"type": "run.metrics", "run": run_id, "points": {k: list(v) for k, v in self.points.items() if v}}
            if self.dropped:
                frame["dropped"] = self.dropped
            frames.append(frame)
        if self.latest:
            frame = {"type": "runs.latest", "runs": {str(r): v for r, v in self.latest.items()}}
            if self.dropped and not self.count:
                frame["dropped"] = self.dropped
            frames.append(frame)
        for run, status in self.statuses.items():
            frames.append({"type": "run.status", "run": run, "status": status})
        self.points, self.count, self.latest, self.statuses, self.dropped = {}, 0, {}, {}, 0
        return frames
