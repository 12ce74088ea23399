"""Event streams a tenant cannot abuse (issue 33): a per-key cap on open streams, ids Redis can read.

One key could open every event stream of a server (the others got ``503 too_many_streams``);
a ``Last-Event-ID`` past 2^64 was answered 200 and the stream then died on Redis' refusal.
"""

from __future__ import annotations

import contextlib

import httpx
import pytest

from contract.settings import Settings
from tests.api.conftest import KeyMaker, bearer
from tests.waiting import until

pytestmark = pytest.mark.timeout(300)
PER_KEY = 2


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """This module's server: two streams a key, three a server."""
    return settings.model_copy(update={"api_max_event_streams_per_key": PER_KEY, "api_max_event_streams": 3})


async def test_one_key_cannot_take_every_stream(api_url: str, tenant_key: KeyMaker) -> None:
    greedy, other = bearer(tenant_key("greedy")), bearer(tenant_key("other"))
    async with httpx.AsyncClient(base_url=api_url, timeout=None) as http, contextlib.AsyncExitStack() as streams:
        for _ in range(PER_KEY):
            opened = await streams.enter_async_context(http.stream("GET", "/v1/events", headers=greedy))
            assert opened.status_code == 200
        refused = await http.get("/v1/events", headers=greedy)
        assert refused.status_code == 429, refused.text
        assert refused.headers["Retry-After"] == "5"
        error = refused.json()["error"]
        assert set(error) == {"code", "message"} and error["code"] == "too_many_streams"
        assert "DRAGOMAN_API_MAX_EVENT_STREAMS_PER_KEY" in error["message"]
        # Another tenant still gets a stream of its own.
        async with http.stream("GET", "/v1/events", headers=other) as theirs:
            assert theirs.status_code == 200
        await streams.aclose()  # the greedy key's streams end: its count goes back

        async def stream_again() -> bool:
            async with http.stream("GET", "/v1/events", headers=greedy) as again:
                return again.status_code == 200

        await until(stream_again, "a stream of the greedy key's again, its earlier ones closed")


@pytest.mark.parametrize("event_id", ["18446744073709551616-0", "1-18446744073709551616", "99999999999999999999-0"])
async def test_an_event_id_past_64_bits_is_400_before_the_stream_starts(
    api_url: str, tenant_key: KeyMaker, event_id: str
) -> None:
    key = bearer(tenant_key("a"))
    async with httpx.AsyncClient(base_url=api_url, timeout=None) as http:
        refused = await http.get("/v1/events", headers={**key, "Last-Event-ID": event_id})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "invalid_event_id"
        refused = await http.get("/v1/events", params={"after": event_id}, headers=key)
        assert refused.status_code == 400
        # The largest id Redis takes is still one.
        async with http.stream("GET", "/v1/events", headers={**key, "Last-Event-ID": "18446744073709551615-0"}) as ok:
            assert ok.status_code == 200
