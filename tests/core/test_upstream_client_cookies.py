"""apps.core.proxy.upstream_client is shared by every caller of a notebook or deployment, so a
cookie an upstream sets must never be stored and sent with the next caller's request."""
import asyncio

import httpx

from apps.core.proxy import upstream_client


def test_a_cookie_set_by_the_upstream_is_not_sent_with_the_next_request():
    seen = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("cookie"))
        return httpx.Response(200, headers={"Set-Cookie": "sessionid=evil; Path=/"})

    async def two_callers():
        async with upstream_client(transport=httpx.MockTransport(upstream)) as client:
            await client.get("http://replica/")
            await client.get("http://replica/")
            return len(client.cookies.jar)

    kept = asyncio.run(two_callers())
    assert seen == [None, None] and kept == 0
