"""``dragoman memory stats|purge`` and ``dragoman submit``'s control flags."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from psycopg import sql

from broker.keys import RedisKeys
from cli.main import EXIT_BAD_INPUT, EXIT_OK, main
from contract.services import ServiceUrls
from contract.settings import Settings
from storage import libpq_url, upgrade_database
from storage.memory import MemoryEntry, MemoryStore


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """Every command here reads the test's servers from the environment."""


@pytest.fixture
def memory_database(service_urls: ServiceUrls, pg: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A migrated database of its own (purge empties the whole table), exported as DRAGOMAN_DATABASE_URL."""
    name = f"mem_{uuid.uuid4().hex[:12]}"
    pg.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = urlunsplit(urlsplit(libpq_url(service_urls.database_url))._replace(path=f"/{name}"))
    upgrade_database(url)
    monkeypatch.setenv("DRAGOMAN_DATABASE_URL", url)
    yield url
    pg.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _fill(url: str, tenant: str = "") -> None:
    async def fill() -> None:
        store = MemoryStore(url)
        first = 0 if not tenant else 100
        await store.store(
            [
                MemoryEntry(f"{i:064x}", model, "few-shot:1", "en", "fr", f"text {i}", f"texte {i}", tenant=tenant)
                for i, model in enumerate(["old@1", "old@1", "new@2"], start=first)
            ]
        )
        await store.close()

    asyncio.run(fill())


def test_stats_then_purge(memory_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "stats"]) == EXIT_OK
    assert "empty" in capsys.readouterr().out
    _fill(memory_database)
    assert main(["memory", "stats"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "old@1" in out and "new@2" in out and "few-shot:1" in out
    assert main(["memory", "stats", "--json"]) == EXIT_OK
    stats = {s["model"]: s for s in json.loads(capsys.readouterr().out)}
    assert stats["old@1"]["entries"] == 2 and stats["new@2"]["entries"] == 1
    assert main(["memory", "purge", "--model", "old@1"]) == EXIT_OK
    assert "deleted 2 " in capsys.readouterr().out
    assert main(["memory", "purge", "--older-than-days", "1"]) == EXIT_OK
    assert "deleted 0 " in capsys.readouterr().out  # the one left is new
    assert main(["memory", "purge"]) == EXIT_OK
    assert "deleted 1 " in capsys.readouterr().out


def test_stats_and_purge_one_tenants_memory(memory_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(memory_database)
    _fill(memory_database, tenant="acme")
    assert main(["memory", "stats", "--json"]) == EXIT_OK
    assert sorted({s["tenant"] for s in json.loads(capsys.readouterr().out)}) == ["", "acme"]
    assert main(["memory", "stats", "--tenant", "acme", "--json"]) == EXIT_OK
    mine = json.loads(capsys.readouterr().out)
    assert {s["tenant"] for s in mine} == {"acme"} and sum(s["entries"] for s in mine) == 3
    assert main(["memory", "stats", "--tenant", "acme"]) == EXIT_OK
    assert "acme" in capsys.readouterr().out
    assert main(["memory", "purge", "--tenant", "acme", "--model", "old@1"]) == EXIT_OK
    assert "deleted 2 " in capsys.readouterr().out  # the no-tenant memory's old@1 entries stay
    assert main(["memory", "purge", "--tenant", ""]) == EXIT_OK
    assert "deleted 3 " in capsys.readouterr().out
    assert main(["memory", "stats", "--tenant", "acme", "--json"]) == EXIT_OK
    assert [s["entries"] for s in json.loads(capsys.readouterr().out)] == [1]


def test_stats_takes_no_purge_selector(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "stats", "--model", "m"]) == EXIT_BAD_INPUT
    assert "select what `purge` deletes" in capsys.readouterr().err


def test_submit_carries_the_controls(capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path) -> None:
    import redis as redis_module

    glossary = tmp_path / "glossary.json"
    glossary.write_text('{"cat": "chat"}')
    argv = ["submit", "The cat.", "--from", "auto", "--to", "fr", "--glossary", f"@{glossary}"]
    assert main([*argv, "--context", "Pets.", "--formality", "informal", "--no-memory"]) == EXIT_OK
    assert settings.redis_url
    with redis_module.Redis.from_url(settings.redis_url, decode_responses=True) as connection:
        [(_, fields)] = connection.xrange(RedisKeys.from_settings(settings).jobs_stream)
    payload = json.loads(fields["payload"])
    assert payload["source_lang"] == "auto" and payload["glossary"] == {"cat": "chat"}
    assert (payload["context"], payload["formality"], payload["memory"]) == ("Pets.", "informal", False)


@pytest.mark.parametrize(
    ("glossary", "says"),
    [("[1]", "must be an object"), ("{nope", "must be a JSON object"), ("@/no/such/file", "cannot read the file")],
)
def test_a_bad_glossary_flag_exits_2(glossary: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "Hi", "--from", "en", "--to", "fr", "--glossary", glossary]) == EXIT_BAD_INPUT
    assert says in capsys.readouterr().err


def test_status_shows_what_the_controls_left() -> None:
    from cli.main import format_job
    from contract.schemas import Job, JobStatus

    job = Job(
        id="j",
        status=JobStatus.SUCCEEDED,
        source_lang="auto",
        target_lang="fr",
        detected_source_lang="en",
        glossary_misses=["cat"],
        from_memory=True,
        translation="Le minou.",
    )
    shown = format_job(job)
    assert "auto -> fr (detected en)" in shown
    assert "target terms missing for: cat" in shown and "served from the translation memory" in shown


def test_status_shows_the_quality_flags() -> None:
    from cli.main import format_job
    from contract.schemas import Job, JobStatus

    flagged = Job(
        id="j",
        status=JobStatus.SUCCEEDED,
        translation="Salle.",
        quality_flags={"numbers": "source number 42 missing from the output", "length_ratio": "the output has 0.2x"},
    )
    shown = format_job(flagged).splitlines()
    assert "quality      numbers: source number 42 missing from the output" in shown
    assert "             length_ratio: the output has 0.2x" in shown
    assert "quality      clean (every quality check passed)" in format_job(
        Job(id="j", status=JobStatus.SUCCEEDED, quality_flags={})
    )
    assert "quality" not in format_job(Job(id="j", status=JobStatus.FAILED))
