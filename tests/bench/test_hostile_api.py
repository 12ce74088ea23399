"""bench.hostile_api: every attack of issue 48 against the working tree's deployment, at a tiny size."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bench.hostile_api import ATTACKS, parse_args, run, table
from bench.hostile_poller import Sample, summary
from bench.hostile_target import Sizes
from contract.services import ServiceUrls

pytestmark = pytest.mark.timeout(600)

TINY = replace(
    Sizes(),
    quiet_s=0.2, comment_texts=2, glossary_terms=20, over_limit_texts=1_001, within_texts=3, libre_texts=1_001,
    libre_chars=12, limited_paragraphs=8, limited_documents=2, idle_sockets=50, hold_s=0.2, header_connections=2,
    header_mib=1, big_header_mib=1, large_documents=2, large_paragraphs=10, dead_webhooks=2, webhook_timeout_s=1.0,
    json_depth=2_000, unknown_key_requests=6, unknown_key_clients=2, unknown_key_body_kib=2, tail_s=0.2,
    settle_s=30.0,
)  # fmt: skip


def test_the_options_are_the_sizes_and_an_unknown_attack_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse_args(["--attacks", "1,4a", "--comment-texts", "7", "--hold-s", "0.5"])
    assert args.attacks == ["1", "4a"]
    assert Sizes.from_options(args) == replace(Sizes(), comment_texts=7, hold_s=0.5)
    assert parse_args([]).attacks == list(ATTACKS)
    with pytest.raises(SystemExit):
        parse_args(["--attacks", "1,99"])
    assert "unknown attack(s) ['99']" in capsys.readouterr().err


def test_the_other_tenants_summary_counts_5xx_and_errors_apart() -> None:
    samples = [Sample("GET", n * 0.1, 0.01 * (n + 1), 200, None) for n in range(98)]
    samples += [Sample("POST", 10.0, 2.5, 503, None), Sample("GET", 12.0, 30.0, None, "timeout")]
    figures = summary(samples)
    assert figures["requests"] == 100 and figures["5xx"] == 1 and figures["errors"] == {"timeout": 1}
    assert figures["p50_s"] == 0.5 and figures["p99_s"] == 2.5 and figures["worst_s"] == 30.0
    assert figures["statuses"] == {"200": 98, "503": 1}
    assert figures["worst_by_route_s"] == {"GET": 30.0, "POST": 2.5}


def test_a_tiny_run_of_every_attack_gives_a_row_each(service_urls: ServiceUrls, tmp_path: Path) -> None:
    """The working tree's API, echo worker and orchestrator as processes: each attack runs while the other
    tenant polls, and the table has one row per attack with the other tenant's figures and the attacker's."""
    rows = run(TINY, list(ATTACKS), None, tmp_path, urls=service_urls)
    assert [row["attack"] for row in rows] == list(ATTACKS)
    for row in rows:
        assert row["side"] == "working tree" and row["got"], row
        assert row["other_tenant"]["requests"] >= 1 and row["api_peak_rss_mib"] > 0, row
    by_attack = {row["attack"]: row for row in rows}
    assert by_attack["0"]["got"] == "nothing sent"
    assert "; 413 in " in by_attack["2a"]["got"]
    assert by_attack["4c"]["got"].startswith("HTTP/1.1 431") or "cut off" in by_attack["4c"]["got"]
    assert "0 segments queued" in by_attack["3"]["got"]
    lines = table(rows, TINY).splitlines()
    assert len(lines) == 2 + len(ATTACKS)
    assert [line.split(".", 1)[0].removeprefix("| ") for line in lines[2:]] == list(ATTACKS)
    assert all(line.count(" | ") == 4 for line in lines[2:])
