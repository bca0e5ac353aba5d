"""The gateway's kept access decisions: when none is kept, requests in flight with the same
credentials and deployment wait for one decision instead of each asking the database."""
import asyncio
from dataclasses import dataclass, field

from apps.deployments import decisions


@dataclass
class _Decision:
    status: int = 200
    targets: list = field(default_factory=lambda: ["replica"])


def test_requests_in_flight_share_one_decision_then_it_is_kept():
    made = []

    async def make():
        made.append(1)
        await asyncio.sleep(0.05)  # the database lookup, in a thread in the gateway
        return _Decision()

    async def run():
        decisions.forget()
        burst = await asyncio.gather(*(decisions.decide_once(("key", 1), make) for _ in range(8)))
        later = await decisions.decide_once(("key", 1), make)
        other = await decisions.decide_once(("key", 2), make)
        return burst, later, other

    burst, later, other = asyncio.run(run())
    assert len({id(d) for d in burst}) == 1 and later is burst[0]  # one decision, shared, then kept
    assert other is not burst[0]
    assert len(made) == 2  # once for each key


def test_a_failed_decision_lets_the_waiting_requests_make_their_own():
    calls = []

    async def make():
        calls.append(1)
        await asyncio.sleep(0.02)
        if len(calls) == 1:
            raise RuntimeError("database unavailable")
        return _Decision()

    async def run():
        decisions.forget()
        return await asyncio.gather(*(decisions.decide_once(("key", 3), make) for _ in range(3)),
                                    return_exceptions=True)

    results = asyncio.run(run())
    assert isinstance(results[0], RuntimeError)
    assert all(isinstance(r, _Decision) for r in results[1:])
