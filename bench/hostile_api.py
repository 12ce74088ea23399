"""The API under hostile load (issue 48): each attack against a real deployment while another tenant polls.

    python -m bench.hostile_api [--against REF] [--attacks 0,1,2a,...] [--comment-texts 40 ...]
                                [--out bench/results/issue48/hostile_api.json]

A side is a source tree's whole deployment as processes (``bench.hostile_stack``): ``dragoman api``,
``dragoman worker --engine echo`` and ``dragoman rq-worker`` on an embedded Redis and PostgreSQL of its
own. The working tree is one side; ``--against REF`` checks REF out beside it (a git worktree in a
temporary folder, run with this tree's ``.venv``) and runs it as a second side, the attacks alternating
between the two (attack 1 on REF first, attack 2a on the working tree first, ...), so that both meet the
same machine. The issue's "before" is ``731eba4^1``.

For each attack (``bench.hostile_requests``, ``bench.hostile_connections``, ``bench.hostile_documents``;
their sizes are options) the side's API is started afresh, another tenant polls it from a process of its
own (``bench.hostile_poller``: ``GET /v1/jobs/{id}`` and ``POST /v1/jobs?wait=10`` by turns, each on a new
connection), the attack runs, and the poller goes on ``--tail-s`` more. Reported per attack and side: the
other tenant's p50, p99 and worst latency, its 5xx answers and errors (refused, reset, timed out), the
API's peak RSS, whether it survived, the tracebacks it logged, and what the attacker got. An attack that
fails (an old tree without a route answers 404; a crash of the client) is a result, never the end of the
run. Raw figures go to ``--out`` as JSON, the table to stdout (Markdown).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import hostile_connections, hostile_documents, hostile_requests
from bench.hostile_poller import Poller, summary
from bench.hostile_stack import REPOSITORY, Api, Side, StackError, checkout_of, memory_mib
from bench.hostile_target import Attack, Key, Outcome, Sizes, Target
from contract.services import ServiceUrls
from storage.embedded import EmbeddedServices

LIMITED_QUEUED_JOBS = 5

ATTACKS: dict[str, tuple[str, Attack]] = {
    "0": ("no attack: the other tenant alone", hostile_requests.quiet),
    "1": ("DeepL tag_handling=xml, {comment_texts} texts of {text_chars:,} chars of unclosed `<!--`",
          hostile_requests.unclosed_comments),
    "2a": ("DeepL {over_limit_texts:,} texts (over the limit) + {glossary_terms:,}-entry glossary",
           hostile_requests.glossary_over_limit),
    "2b": ("DeepL 2 x {within_texts:,} texts (within) + {glossary_terms:,}-entry glossary",
           hostile_requests.glossary_within_limit),
    "2c": ("LibreTranslate html, {libre_texts:,} q of {libre_chars:,} chars of unclosed `<a`",
           hostile_requests.libretranslate_html),
    "3": ("key limited to 5 queued jobs: 1 + {limited_documents} documents of {limited_paragraphs:,} segments",
          hostile_documents.queued_limit),
    "4a": ("idle sockets (open-file limit + 100, or --idle-sockets), held {hold_s:g} s",
           hostile_connections.idle_sockets),
    "4b": ("{header_connections} unfinished heads of {header_mib} MiB, held {hold_s:g} s",
           hostile_connections.unfinished_heads),
    "4c": ("one complete {big_header_mib} MiB header", hostile_connections.big_header),
    "5a": ("{large_documents} documents of {large_paragraphs:,} segments, then the other tenant's 2-paragraph one",
           hostile_documents.document_turns),
    "5b": ("{dead_webhooks} webhooks to a receiver that never answers (timeout {webhook_timeout_s:g} s), then "
           "the other tenant's", hostile_documents.webhook_turns),
    "6": ("malformed inputs: JSON {json_depth:,} deep x4, NUL in glossary_id, CSV field > 128 KiB, "
          "alternatives 1e400, usage end=0001-01-05", hostile_requests.malformed_inputs),
    "7": ("{unknown_key_requests} requests with unknown keys, {unknown_key_clients} connections, "
          "{unknown_key_body_kib} KiB bodies", hostile_requests.unknown_keys),
}  # fmt: skip


@dataclass
class SideRun:
    """A side with what its attacks share: the other tenant's key and job, the attackers' keys."""

    side: Side
    victim: Key
    attacker: Key
    limited: Key
    victim_job: str | None = None

    def job_of_victim(self, api: Api) -> str:
        """The other tenant's job it reads by id (submitted, and waited for, once per side)."""
        if self.victim_job is None:
            request = urllib.request.Request(
                f"{api.base}/v1/jobs?wait=30",
                data=json.dumps({"text": "The other tenant's job.", "source_lang": "en", "target_lang": "fr"}).encode(),
                headers={"Authorization": f"Bearer {self.victim.secret}", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=60) as answer:
                self.victim_job = str(json.loads(answer.read())["id"])
        return self.victim_job


def measure(run: SideRun, name: str, sizes: Sizes) -> dict[str, Any]:
    """Attack ``name`` on a fresh API of ``run``'s side while the other tenant polls; the row's figures."""
    _, attack = ATTACKS[name]
    with run.side.api(name) as api:
        urls = run.side.urls
        target = Target(
            base=api.base, api_pid=api.process.pid, redis_url=urls.redis_url, database_url=urls.database_url,
            key_prefix=run.side.key_prefix, victim=run.victim, attacker=run.attacker, sizes=sizes,
            limited=run.limited,
        )  # fmt: skip
        job = run.job_of_victim(api)
        rss_start = memory_mib(api.process.pid, "VmRSS")
        with Poller(api.base, run.victim.secret, job, sizes.poll_timeout_s) as poller:
            started = time.monotonic()
            try:
                outcome = asyncio.run(attack(target))
            except Exception as exc:  # an attack the client could not finish is a result too
                outcome = Outcome(f"attack failed: {type(exc).__name__}: {exc}"[:300])
            seconds = time.monotonic() - started
            time.sleep(sizes.tail_s)  # what the attack left behind
        row: dict[str, Any] = {
            "attack": name,
            "side": run.side.label,
            "seconds": round(seconds, 2),
            "other_tenant": summary(poller.samples),
            "api_rss_start_mib": round(rss_start or 0, 1),
            "api_peak_rss_mib": round(api.peak_rss_mib() or 0, 1),
            "api_alive": api.alive(),
            "api_tracebacks": api.tracebacks(),
            "got": outcome.got,
            "measure": outcome.measure,
            "details": outcome.details,
        }
    other = row["other_tenant"]
    print(
        f"[{run.side.label}] {name}: other tenant p50/p99/worst "
        f"{other['p50_s']}/{other['p99_s']}/{other['worst_s']} s {other['worst_by_route_s']}, "
        f"5xx {other['5xx']}, errors {sum(other['errors'].values())}; API peak {row['api_peak_rss_mib']} MiB; "
        f"attacker got: {outcome.got} {outcome.measure}",
        flush=True,
    )
    return row


@contextmanager
def embedded(folder: Path) -> Iterator[ServiceUrls]:
    """An embedded Redis and PostgreSQL in ``folder`` while the block runs."""
    services = EmbeddedServices(folder)
    urls = services.up()
    try:
        yield urls
    finally:
        services.down()


def describe(ref: str) -> str:
    """``ref`` and the commit it names."""
    sha = subprocess.run(
        ["git", "-C", str(REPOSITORY), "rev-parse", "--short", ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    return f"{ref} ({sha})"


def run(
    sizes: Sizes, attacks: list[str], against: str | None, work: Path, urls: ServiceUrls | None = None
) -> list[dict[str, Any]]:
    """Every attack on each side, alternating; the rows. ``urls``: servers for the working tree's side (only
    without ``against``), else embedded ones in ``work``."""
    if urls is not None and against is not None:
        raise ValueError("servers of one's own are for the working tree alone: each side of --against needs its own")
    settings_env = {"DRAGOMAN_WEBHOOK_TIMEOUT_SECONDS": str(sizes.webhook_timeout_s)}
    with ExitStack() as stack:
        plan: list[tuple[str, Path | None]] = []
        if against is not None:
            plan.append((f"before {describe(against)}", stack.enter_context(checkout_of(against))))
        plan.append(("after (working tree)" if against else "working tree", None))
        runs = []
        for number, (label, checkout) in enumerate(plan):
            side_urls = urls or stack.enter_context(embedded(work / f"servers-{number}"))
            side = Side(label, checkout, side_urls, work / f"logs-{number}", settings_env)
            side.start()
            stack.callback(side.stop)
            runs.append(
                SideRun(side, side.key("victim"), side.key("attacker"),
                        side.key("limited", max_queued_jobs=LIMITED_QUEUED_JOBS))
            )  # fmt: skip
        rows = []
        for index, name in enumerate(attacks):
            for side_run in runs if index % 2 == 0 else reversed(runs):
                try:
                    rows.append(measure(side_run, name, sizes))
                except StackError as exc:  # an API that would not start is this row's result, not the run's end
                    print(exc, flush=True)
                    rows.append(unmeasured(side_run.side.label, name, str(exc)))
        return rows


def unmeasured(side: str, name: str, why: str) -> dict[str, Any]:
    """The row of an attack that could not run on ``side``."""
    other = {"requests": 0, "p50_s": 0.0, "p99_s": 0.0, "worst_s": 0.0, "worst_by_route_s": {}, "5xx": 0, "errors": {},
             "statuses": {}}  # fmt: skip
    return {
        "attack": name, "side": side, "seconds": 0.0, "other_tenant": other, "api_rss_start_mib": 0.0,
        "api_peak_rss_mib": 0.0, "api_alive": False, "api_tracebacks": 0, "got": f"not run: {why}"[:300],
        "measure": "", "details": {},
    }  # fmt: skip


def _latency(row: dict[str, Any]) -> str:
    other = row["other_tenant"]
    return f"{other['p50_s']:.2f} / {other['p99_s']:.2f} / **{other['worst_s']:.2f}**"


def _failures(row: dict[str, Any]) -> str:
    other = row["other_tenant"]
    errors = ", ".join(f"{n} {kind}" for kind, n in other["errors"].items())
    return f"{other['5xx']} / {errors or 0} (of {other['requests']})"


def _memory(row: dict[str, Any]) -> str:
    dead = "" if row["api_alive"] else ", **died**"
    return f"{row['api_rss_start_mib']:.0f} → {row['api_peak_rss_mib']:.0f}{dead}"


def _outcome(row: dict[str, Any]) -> str:
    traces = f"; {row['api_tracebacks']} tracebacks logged" if row["api_tracebacks"] else ""
    measure = f"; other tenant: {row['measure']}" if row["measure"] else ""
    return f"{row['got']}{measure}{traces}".replace("|", "/")


COLUMNS = (
    ("other tenant p50 / p99 / worst (s)", _latency),
    ("other tenant 5xx / errors", _failures),
    ("API RSS start → peak (MiB)", _memory),
    ("attacker got", _outcome),
)


def table(rows: list[dict[str, Any]], sizes: Sizes) -> str:
    """The Markdown table: one row per attack, each figure's column once per side (before, after)."""
    sides = list(dict.fromkeys(row["side"] for row in rows))
    by = {(row["attack"], row["side"]): row for row in rows}
    header = ["attack"] + [f"{title}: {side}" for title, _ in COLUMNS for side in sides]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name in dict.fromkeys(row["attack"] for row in rows):
        label = f"{name}. " + ATTACKS[name][0].format(**vars(sizes)).replace("|", "/")
        cells = [render(by[(name, side)]) if (name, side) in by else "" for _, render in COLUMNS for side in sides]
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options (``argv``: the command line without the program, else ``sys.argv``'s)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", metavar="REF", help="also run REF's code (the issue's before: 731eba4^1)")
    parser.add_argument(
        "--attacks", type=_attacks, default=list(ATTACKS), help=f"comma-separated, of {', '.join(ATTACKS)} (all)"
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/issue48/hostile_api.json"))
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="keep the servers' data and every process's log here (default: a temporary folder, removed)",
    )
    Sizes.add_options(parser)
    return parser.parse_args(argv)


def _attacks(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in ATTACKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown attack(s) {unknown}; the attacks are {', '.join(ATTACKS)}")
    return names


def main() -> None:
    """Run, print the table, write the JSON."""
    args = parse_args()
    sizes = Sizes.from_options(args)
    started = time.strftime("%F %R")
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-hostile-") as temporary:
        rows = run(sizes, args.attacks, args.against, args.work or Path(temporary))
    print(table(rows, sizes))
    result = {
        "against": args.against,
        "sizes": vars(sizes),
        "rows": rows,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "when": started,
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
