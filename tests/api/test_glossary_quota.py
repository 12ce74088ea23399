"""Each tenant's stored glossaries are held to a quota (issue 48 item 7): how many, and the bytes of their terms.

Before, one tenant could store glossaries of 4.3 MB each, any number of them. Now ``POST /v2/glossaries``
past ``DRAGOMAN_GLOSSARY_QUOTA_COUNT`` or ``DRAGOMAN_GLOSSARY_QUOTA_BYTES`` is ``413
glossary_quota_exceeded`` in DeepL's error shape, nothing stored, exact when creates race for the last
place; another tenant's glossaries never take its room.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from api import create_app
from contract.settings import Settings
from tests.api.conftest import KeyMaker, with_unlimited_wait


@asynccontextmanager
async def deepl_door(settings: Settings, **quota: int) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of the API with the glossary quota ``quota`` (its settings' names)."""
    app = create_app(with_unlimited_wait(settings).model_copy(update=quota))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as client:
            yield client


def glossary(name: str, entries: str = "hello\tHallo") -> dict[str, str]:
    """A ``POST /v2/glossaries`` form body: EN -> DE, TSV entries."""
    return {"name": name, "source_lang": "EN", "target_lang": "DE", "entries": entries, "entries_format": "tsv"}


def deepl_key(key: str) -> dict[str, str]:
    """DeepL's Authorization header for ``key``."""
    return {"Authorization": f"DeepL-Auth-Key {key}"}


async def test_past_the_count_a_create_is_413_before_its_entries_are_read(
    settings: Settings, tenant_key: KeyMaker
) -> None:
    """Two glossaries fit a quota of two; the third is refused, even one whose entries are bad (not read at all);
    deleting one makes room; another tenant's quota is its own."""
    key, other = deepl_key(tenant_key("count")), deepl_key(tenant_key("other"))
    async with deepl_door(settings, glossary_quota_count=2) as http:
        first = await http.post("/v2/glossaries", data=glossary("a"), headers=key)
        assert first.status_code == 201, first.text
        assert (await http.post("/v2/glossaries", data=glossary("b"), headers=key)).status_code == 201
        refused = await http.post("/v2/glossaries", data=glossary("c"), headers=key)
        unread = await http.post("/v2/glossaries", data=glossary("d", entries="no tab here"), headers=key)
        theirs = await http.post("/v2/glossaries", data=glossary("a"), headers=other)
        listed = (await http.get("/v2/glossaries", headers=key)).json()["glossaries"]
        deleted = await http.delete(f"/v2/glossaries/{first.json()['glossary_id']}", headers=key)
        again = await http.post("/v2/glossaries", data=glossary("c"), headers=key)
    for answer in (refused, unread):
        assert answer.status_code == 413, answer.text
        body = answer.json()
        assert set(body) == {"message", "code"} and body["code"] == "glossary_quota_exceeded"
        assert "DRAGOMAN_GLOSSARY_QUOTA_COUNT=2" in body["message"]
    assert [item["name"] for item in listed] == ["a", "b"]
    assert theirs.status_code == 201, theirs.text
    assert deleted.status_code == 204
    assert again.status_code == 201, again.text


async def test_past_the_bytes_a_create_is_413_naming_them(settings: Settings, tenant_key: KeyMaker) -> None:
    """A quota of 1,000 bytes: a glossary of 680 bytes of terms fits, a second does not, nothing stored."""
    key = deepl_key(tenant_key("bytes"))
    entries = "\n".join(f"term{n:03d}\tBegriff{n:03d}" for n in range(40))  # 40 entries of 17 bytes of terms
    async with deepl_door(settings, glossary_quota_bytes=1_000) as http:
        created = await http.post("/v2/glossaries", data=glossary("a", entries), headers=key)
        refused = await http.post("/v2/glossaries", data=glossary("b", entries), headers=key)
        listed = (await http.get("/v2/glossaries", headers=key)).json()["glossaries"]
    assert created.status_code == 201, created.text
    assert refused.status_code == 413, refused.text
    assert refused.json()["code"] == "glossary_quota_exceeded"
    assert "terms are 680 bytes and would take your glossaries to 1,360 bytes" in refused.json()["message"]
    assert [item["name"] for item in listed] == ["a"]


async def test_creates_at_once_never_pass_the_quota(settings: Settings, tenant_key: KeyMaker) -> None:
    """Twelve simultaneous creates against a quota of three: three stored, nine refused 413, never a fourth."""
    key = deepl_key(tenant_key("race"))
    async with deepl_door(settings, glossary_quota_count=3) as http:
        answers = await asyncio.gather(
            *(http.post("/v2/glossaries", data=glossary(f"g{n}"), headers=key) for n in range(12))
        )
        listed = (await http.get("/v2/glossaries", headers=key)).json()["glossaries"]
    assert sorted(answer.status_code for answer in answers) == [201] * 3 + [413] * 9
    assert len(listed) == 3
