"""``dragoman usage``: every tenant's usage for the operator, as a table or JSON."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from psycopg import sql

from cli.main import EXIT_BAD_INPUT, EXIT_OK, main
from contract.services import ServiceUrls
from contract.settings import Settings
from storage import JobRowWriter, RowRecord, libpq_url, upgrade_database

DAY = dt.date(2031, 5, 4)


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """Every command here reads the test's servers from the environment."""


@pytest.fixture
def usage_database(service_urls: ServiceUrls, pg: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A migrated database of its own (the command lists every tenant), exported as DRAGOMAN_DATABASE_URL."""
    name = f"usage_{uuid.uuid4().hex[:12]}"
    pg.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = urlunsplit(urlsplit(libpq_url(service_urls.database_url))._replace(path=f"/{name}"))
    upgrade_database(url)
    monkeypatch.setenv("DRAGOMAN_DATABASE_URL", url)
    yield url
    pg.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _record(tenant: str | None, text: str, status: str = "succeeded", model: str = "m") -> RowRecord:
    at = dt.datetime(DAY.year, DAY.month, DAY.day, 8, tzinfo=dt.UTC).timestamp()
    return RowRecord(
        str(uuid.uuid4()), status, "en", "fr", text, text if status == "succeeded" else None,
        None if status == "succeeded" else "boom", 1, model, 4, 5, at, at, at, {}, None, None, None, tenant=tenant,
    )  # fmt: skip


def _fill(url: str) -> None:
    async def fill() -> None:
        rows = JobRowWriter(url)
        await rows.write_rows(
            [
                _record("acme", "Hello"),
                _record("acme", "Bye", "failed"),
                _record("acme", "Other model", model="m2"),
                _record("globex", "x" * 40),
                _record(None, "no tenant"),
            ]
        )
        await rows.close()

    asyncio.run(fill())


def test_usage_lists_every_tenant_as_json_and_as_a_table(
    usage_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    window = ["--from", str(DAY), "--to", str(DAY)]
    assert main(["usage", *window]) == EXIT_OK
    assert "no finished jobs" in capsys.readouterr().out
    _fill(usage_database)
    assert main(["usage", *window, "--json"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["group_by"] == ["day"] and report["start"] == report["end"] == str(DAY)
    got = {
        (d["tenant"], d["jobs"], d["succeeded"], d["failed"], d["characters"], d["prompt_tokens"])
        for d in report["data"]
    }
    assert got == {("acme", 3, 2, 1, 5 + 3 + 11, 12), ("globex", 1, 1, 0, 40, 4), (None, 1, 1, 0, 9, 4)}
    assert main(["usage", *window, "--tenant", "acme", "--group-by", "model", "--json"]) == EXIT_OK
    by_model = json.loads(capsys.readouterr().out)["data"]
    assert [(d["tenant"], d["day"], d["model"], d["jobs"]) for d in by_model] == [
        ("acme", None, "m", 2),
        ("acme", None, "m2", 1),
    ]
    assert main(["usage", *window, "--tenant", ""]) == EXIT_OK
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["tenant", "day", "model", "jobs"]
    assert [line.split()[:4] for line in table[1:]] == [["(none)", str(DAY), "-", "1"]]


@pytest.mark.parametrize(
    "flags",
    [
        ["--from", "2031-5-4"],
        ["--to", "20310504"],
        ["--from", "2031-05-05", "--to", "2031-05-04"],
        ["--group-by", "tenant"],
    ],
)
def test_bad_flags_exit_2(usage_database: str, flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", *flags]) == EXIT_BAD_INPUT
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("end", ["0001-01-05", "0001-01-01", "9999-12-31"])
def test_a_range_at_the_ends_of_the_calendar_is_answered(
    usage_database: str, capsys: pytest.CaptureFixture[str], end: str
) -> None:
    """``--to 0001-01-05``: the default 30 days before it are before year 1 (an ``OverflowError`` traceback before)."""
    assert main(["usage", "--to", end, "--json"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["end"] == end
    assert report["start"] == ("0001-01-01" if end.startswith("0001") else "9999-12-02")
