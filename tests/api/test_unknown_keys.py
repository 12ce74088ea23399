"""Keys that are not valid are limited per client address (issue 48 item 7), on every door, against real Redis.

Before, every request with a made-up key was looked up in PostgreSQL, however many came from one
address, and slowed everyone else's requests. Now a key found not valid is remembered briefly, each
address's tries with such keys are counted in Redis (shared by every API server), and past
``DRAGOMAN_API_UNKNOWN_KEY_LIMIT_PER_MINUTE`` the address is answered ``429 too_many_invalid_keys``
with nothing looked up, while valid keys from other addresses go on as before.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from api import create_app
from api.unknown_keys import WINDOW_SECONDS, UnknownKeyLimiter, address_bucket
from broker.keys import RedisKeys
from broker.redis_client import open_redis
from contract.settings import Settings
from storage import ApiKey, ApiKeyStore
from tests.api.conftest import KeyMaker, bearer, with_unlimited_wait

LIMIT = 5
ATTACKER = "203.0.113.7"
TENANT = "198.51.100.20"


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every key secret the API looked up in PostgreSQL, in order (the store's lookups, counted)."""
    seen: list[str] = []
    find = ApiKeyStore.find

    async def counted_find(self: ApiKeyStore, key: str) -> ApiKey | None:
        seen.append(key)
        return await find(self, key)

    monkeypatch.setattr(ApiKeyStore, "find", counted_find)
    return seen


@asynccontextmanager
async def api_server(settings: Settings) -> AsyncIterator[Callable[[str], httpx.AsyncClient]]:
    """One API server (its own key cache); ``client(address)``: an in-process client connecting from ``address``."""
    app = create_app(with_unlimited_wait(settings).model_copy(update={"api_unknown_key_limit_per_minute": LIMIT}))
    clients: list[httpx.AsyncClient] = []

    def client(address: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=(address, 40_000))
        made = httpx.AsyncClient(transport=transport, base_url="http://api.test")
        clients.append(made)
        return made

    async with app.router.lifespan_context(app):
        try:
            yield client
        finally:
            for made in clients:
                await made.aclose()


def made_up() -> str:
    """A key nobody has: a new one for every request, as a flood would send."""
    return "dgm_" + secrets.token_hex(16)


# (door, how a request of it carries the key): every door ends in the same check.
DOORS: list[tuple[str, Callable[[httpx.AsyncClient, str], Any]]] = [
    ("native", lambda http, key: http.get("/v1/models", headers=bearer(key))),
    ("deepl-header", lambda http, key: http.get("/v2/usage", headers={"Authorization": f"DeepL-Auth-Key {key}"})),
    ("deepl-query", lambda http, key: http.post(f"/v2/languages?auth_key={key}")),
    ("libretranslate-body", lambda http, key: http.post("/detect", json={"q": "Hello there", "api_key": key})),
    ("libretranslate-bearer", lambda http, key: http.post("/detect", json={"q": "Hello there"}, headers=bearer(key))),
]


def error_code(response: httpx.Response) -> str:
    """The code of an error answer in any door's shape."""
    body = response.json()
    code = body["error"]["code"] if isinstance(body.get("error"), dict) else body["code"]
    assert isinstance(code, str)
    return code


@pytest.mark.parametrize(("door", "send"), DOORS, ids=[door for door, _ in DOORS])
async def test_a_flood_of_made_up_keys_from_one_address_is_429_without_lookups(
    settings: Settings,
    tenant_key: KeyMaker,
    lookups: list[str],
    door: str,
    send: Callable[[httpx.AsyncClient, str], Any],
) -> None:
    """Thirty made-up keys from one address: the first five refused as the door refuses a bad key, each looked
    up once; the other 25 are ``429 too_many_invalid_keys`` with ``Retry-After``, nothing looked up. A tenant's
    valid key from another address is answered all along, and one the server held already still passes from the
    flooding address."""
    valid = tenant_key("tenant")
    held = tenant_key("held")
    async with api_server(settings) as client:
        attacker, tenant = client(ATTACKER), client(TENANT)
        assert (await send(attacker, held)).status_code < 400  # this server holds the key from now on
        answers = []
        for _ in range(30):
            answers.append(await send(attacker, made_up()))
            assert (await send(tenant, valid)).status_code < 400
        from_attacker_with_held_key = await send(attacker, held)
    codes = [answer.status_code for answer in answers]
    assert codes[:LIMIT] == [401 if door == "native" else 403] * LIMIT, [answer.text for answer in answers[:LIMIT]]
    assert codes[LIMIT:] == [429] * (30 - LIMIT)
    refused = answers[-1]
    assert error_code(refused) == "too_many_invalid_keys"
    assert 1 <= int(refused.headers["Retry-After"]) <= WINDOW_SECONDS
    made_up_lookups = [key for key in lookups if key not in (valid, held)]
    assert len(made_up_lookups) == LIMIT
    assert from_attacker_with_held_key.status_code < 400


async def test_the_same_unknown_key_again_is_not_looked_up_again(
    settings: Settings, lookups: list[str], tenant_key: KeyMaker
) -> None:
    """A made-up key sent twice is looked up once (remembered for a few seconds), and counted both times."""
    key = made_up()
    async with api_server(settings) as client:
        http = client(ATTACKER)
        answers = [await http.get("/v1/models", headers=bearer(key)) for _ in range(LIMIT + 2)]
    assert lookups == [key]
    assert [answer.status_code for answer in answers] == [401] * LIMIT + [429] * 2


async def test_servers_share_the_count(settings: Settings, lookups: list[str]) -> None:
    """Five made-up keys at one server, then a sixth at another: refused there too, not looked up (Redis counts)."""
    async with api_server(settings) as first, api_server(settings) as second:
        for _ in range(LIMIT):
            assert (await first(ATTACKER).get("/v1/models", headers=bearer(made_up()))).status_code == 401
        at_second = await second(ATTACKER).get("/v1/models", headers=bearer(made_up()))
    assert at_second.status_code == 429 and error_code(at_second) == "too_many_invalid_keys"
    assert len(lookups) == LIMIT


async def test_the_limit_lasts_until_the_window_ends(settings: Settings) -> None:
    """Past the limit an address is refused until its minute ends, then counted afresh; others never counted."""
    redis = open_redis(settings.redis_url or "")
    limiter = UnknownKeyLimiter(redis, RedisKeys.from_settings(settings), limit_per_minute=2)
    start = (int(time.time() // WINDOW_SECONDS) + 1) * WINDOW_SECONDS  # a window's start, for exact numbers
    try:
        assert [(await limiter.note_unknown("a", start + n)).allowed for n in range(3)] == [True, True, False]
        refused = await limiter.check("a", start + 20)
        assert (refused.allowed, refused.retry_after) == (False, 40)
        assert (await limiter.check("b", start + 20)).allowed
        assert (await limiter.check("a", start + WINDOW_SECONDS)).allowed
        fresh = UnknownKeyLimiter(redis, RedisKeys.from_settings(settings), limit_per_minute=2)
        assert not (await fresh.check("a", start + 30)).allowed  # another server reads the count from Redis
    finally:
        await redis.aclose()


@pytest.mark.parametrize(
    ("host", "counted_as"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("::ffff:203.0.113.7", "203.0.113.7"),
        (None, "unknown"),
        ("testclient", "testclient"),
    ],
)
def test_an_ipv6_client_is_counted_as_its_64_network(host: str | None, counted_as: str) -> None:
    """A host given a whole /64 cannot take a fresh address for every try."""
    assert address_bucket(host) == counted_as
