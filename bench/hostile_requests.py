"""The attacks of ``bench.hostile_api`` that are requests (issue 48, items 1, 2, 6 and 7), and the quiet baseline.

Each is one tenant's (or no tenant's) legal-looking requests to the DeepL, LibreTranslate and native
doors, sized by :class:`bench.hostile_target.Sizes`; each returns what the attacker got.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from bench.hostile_target import Outcome, Target, bearer, counted, deepl_key, send, session

UNCLOSED_COMMENT = "<!--"
UNCLOSED_TAG = "<a "


async def quiet(target: Target) -> Outcome:
    """No attack: the other tenant polls alone for ``quiet_s`` (its baseline)."""
    await asyncio.sleep(target.sizes.quiet_s)
    return Outcome("nothing sent")


async def unclosed_comments(target: Target) -> Outcome:
    """1: one DeepL request, ``tag_handling=xml``, of texts that are unclosed ``<!--`` from end to end."""
    sizes = target.sizes
    text = (UNCLOSED_COMMENT * (sizes.text_chars // len(UNCLOSED_COMMENT) + 1))[: sizes.text_chars]
    body = {"text": [text] * sizes.comment_texts, "source_lang": "EN", "target_lang": "DE", "tag_handling": "xml"}
    async with session(target) as http:
        status, seconds, _ = await send(http, "POST", "/v2/translate", json=body, headers=deepl_key(target.attacker))
    return Outcome(f"{status} in {seconds:.1f} s", details={"texts": sizes.comment_texts, "chars": sizes.text_chars})


def _glossary_entries(terms: int) -> str:
    return "\n".join(f"term{n:05d}\tBegriff{n:05d}" for n in range(terms))


async def _glossary(target: Target) -> tuple[str | None, str]:
    """A stored EN -> DE glossary of ``glossary_terms`` entries of the attacker's: its id (``None`` if refused)."""
    body = {
        "name": "big", "source_lang": "EN", "target_lang": "DE",
        "entries": _glossary_entries(target.sizes.glossary_terms), "entries_format": "tsv",
    }  # fmt: skip
    async with session(target) as http:
        status, _, answer = await send(http, "POST", "/v2/glossaries", json=body, headers=deepl_key(target.attacker))
    glossary_id = answer.get("glossary_id") if isinstance(answer, dict) else None
    return (str(glossary_id) if glossary_id else None), status


def _texts(count: int) -> list[str]:
    return [f"Text {n} names term{n % 10_000:05d} and term{(n + 1) % 10_000:05d}." for n in range(count)]


async def glossary_over_limit(target: Target) -> Outcome:
    """2a: a glossary of the most entries, then one DeepL request of more texts than a request may carry."""
    glossary_id, created = await _glossary(target)
    body = {"text": _texts(target.sizes.over_limit_texts), "source_lang": "EN", "target_lang": "DE"}
    if glossary_id:
        body["glossary_id"] = glossary_id
    async with session(target) as http:
        status, seconds, _ = await send(http, "POST", "/v2/translate", json=body, headers=deepl_key(target.attacker))
    return Outcome(f"glossary {created}; {status} in {seconds:.1f} s", details={"texts": len(body["text"])})


async def glossary_within_limit(target: Target) -> Outcome:
    """2b: the same glossary, two concurrent DeepL requests of ``within_texts`` texts each (allowed)."""
    glossary_id, created = await _glossary(target)
    body = {"text": _texts(target.sizes.within_texts), "source_lang": "EN", "target_lang": "DE"}
    if glossary_id:
        body["glossary_id"] = glossary_id
    async with session(target) as http:
        started = time.monotonic()
        answers = await asyncio.gather(
            *(send(http, "POST", "/v2/translate", json=body, headers=deepl_key(target.attacker)) for _ in range(2))
        )
        seconds = time.monotonic() - started
    return Outcome(f"glossary {created}; {counted([a[0] for a in answers])} in {seconds:.1f} s")


async def libretranslate_html(target: Target) -> Outcome:
    """2c: one LibreTranslate ``/translate``, ``format: html``, of more ``q`` than a request may carry, each
    unclosed start tags from end to end."""
    sizes = target.sizes
    text = (UNCLOSED_TAG * (sizes.libre_chars // len(UNCLOSED_TAG) + 1))[: sizes.libre_chars]
    body = {"q": [text] * sizes.libre_texts, "source": "en", "target": "de", "format": "html",
            "api_key": target.attacker.secret}  # fmt: skip
    async with session(target) as http:
        status, seconds, _ = await send(http, "POST", "/translate", json=body)
    return Outcome(f"{status} in {seconds:.1f} s", details={"q": sizes.libre_texts, "chars": sizes.libre_chars})


def _malformed(target: Target) -> list[tuple[str, str, str, dict[str, str], bytes]]:
    """Issue 48's item 6: (name, method, path, headers, body) of each input that answered 500."""
    deep = ("[" * target.sizes.json_depth + "]" * target.sizes.json_depth).encode()
    as_json = {"Content-Type": "application/json"}
    key = target.attacker
    csv_field = json.dumps({
        "name": "wide", "source_lang": "EN", "target_lang": "DE", "entries_format": "csv",
        "entries": "a" * (200 * 1024) + ",b",
    }).encode()  # fmt: skip
    fields = json.dumps({"q": "Hello", "source": "en", "target": "de", "api_key": key.secret})
    alternatives = (fields[:-1] + ', "alternatives": 1e400}').encode()  # json.dumps writes no such number
    return [
        *((f"deep JSON {path}", "POST", path, as_json, deep) for path in ("/v2/translate", "/v2/glossaries")),
        *((f"deep JSON {path}", "POST", path, as_json, deep) for path in ("/translate", "/detect")),
        ("NUL in glossary_id (form)", "POST", "/v2/translate",
         {"Content-Type": "application/x-www-form-urlencoded", **deepl_key(key)},
         b"text=Hello&target_lang=DE&source_lang=EN&glossary_id=%00"),
        ("CSV field over 128 KiB", "POST", "/v2/glossaries", {**as_json, **deepl_key(key)}, csv_field),
        ("alternatives 1e400", "POST", "/translate", as_json, alternatives),
        ("usage end=0001-01-05", "GET", "/v1/usage?end=0001-01-05", bearer(key), b""),
    ]  # fmt: skip


async def malformed_inputs(target: Target) -> Outcome:
    """6: each input of issue 48's 500s, once, in turn; how many answers were 5xx."""
    cases = _malformed(target)
    answers: dict[str, str] = {}
    async with session(target, fresh=True) as http:
        for name, method, path, headers, body in cases:
            status, _, _ = await send(http, method, path, headers=headers, data=body or None)
            answers[name] = status
    fives = [name for name, status in answers.items() if status.startswith("5")]
    return Outcome(f"5xx in {len(fives)} of {len(cases)}", details={"answers": answers, "5xx": fives})


async def unknown_keys(target: Target) -> Outcome:
    """7: ``unknown_key_requests`` requests with keys nobody has, each a new one, over ``unknown_key_clients``
    connections: by turns a DeepL translate and a LibreTranslate translate (key in the header or query, a body
    of ``unknown_key_body_kib`` KiB), and a native ``GET /v1/jobs/{id}``."""
    sizes = target.sizes
    texts = ["Unknown keys send long bodies."] * max(1, sizes.unknown_key_body_kib * 1024 // 34)
    deepl_body = json.dumps({"text": texts, "target_lang": "DE"}).encode()
    libre_body = json.dumps({"q": texts, "source": "en", "target": "de"}).encode()
    as_json = {"Content-Type": "application/json"}
    statuses: list[str] = []
    pending = iter(range(sizes.unknown_key_requests))

    async def client() -> None:
        for n in pending:
            secret = f"dragoman-{uuid.uuid4().hex}"
            if n % 3 == 0:
                args = ("POST", "/v2/translate", {"Authorization": f"DeepL-Auth-Key {secret}", **as_json}, deepl_body)
            elif n % 3 == 1:
                args = ("POST", f"/translate?api_key={secret}", as_json, libre_body)
            else:
                args = ("GET", f"/v1/jobs/{uuid.uuid4()}", {"Authorization": f"Bearer {secret}"}, b"")
            method, path, headers, body = args
            statuses.append((await send(http, method, path, headers=headers, data=body or None))[0])

    async with session(target, sizes.unknown_key_clients) as http:
        started = time.monotonic()
        await asyncio.gather(*(client() for _ in range(sizes.unknown_key_clients)))
        seconds = time.monotonic() - started
    return Outcome(f"{counted(statuses)} in {seconds:.1f} s")
