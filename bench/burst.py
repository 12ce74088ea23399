"""A burst from two tenants at once against a real ``dragoman api``: how many answers are 5xx, and how slow.

    python -m bench.burst [--requests 2000] [--concurrency 500] [--scenarios get-job,models,post-job]
                          [--label after] [--out bench/results/issue33/burst-after.json]

Needs ApacheBench (``ab``, a C load generator: a Python client cannot drive an API this fast):
``apt-get install apache2-utils`` on Debian and Ubuntu. One embedded Redis and PostgreSQL (or
``DRAGOMAN_REDIS_URL``/``DRAGOMAN_DATABASE_URL``), one ``dragoman api`` process (uvicorn, one
event loop) with the pool settings of ``--env NAME=VALUE`` (repeatable), two API keys of two
tenants (rate and queued-job limits no burst reaches). Each scenario runs two ``ab`` processes
at the same time, one per tenant key, each sending ``--requests`` requests over ``--concurrency``
connections:

- ``get-job``: both tenants ``GET /v1/jobs/{id}`` of a job of their own (queued: no worker runs,
  so the state record in Redis answers);
- ``models``: both ``GET /v1/models`` (Redis only: the served names and live workers);
- ``post-job``: both ``POST /v1/jobs`` with one job each (``-p``: Redis scripts, the tenant's
  queued count);
- ``mixed``: tenant A posts jobs while tenant B reads its job.

Each ``ab`` runs with ``-v 3``, which prints every response's status line; the counts of 2xx,
4xx and 5xx come from those, the latency percentiles (whole request, connect included) and
requests/s from ``ab``'s summary. The API's first request per key is sent before the burst
(the key cache is warm, as it is on a server that has been up a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.api import api_key, api_process
from bench.servers import benchmark_servers
from contract.settings import Settings

SCENARIOS = ("get-job", "models", "post-job", "mixed")
_STATUS = re.compile(rb"^LOG: Response code = (\d{3})", re.MULTILINE)
_PERCENT = re.compile(r"^\s+(\d+)%\s+(\d+)", re.MULTILINE)
_FIELD = {
    "complete": re.compile(r"^Complete requests:\s+(\d+)", re.MULTILINE),
    "failed": re.compile(r"^Failed requests:\s+(\d+)", re.MULTILINE),
    "non_2xx": re.compile(r"^Non-2xx responses:\s+(\d+)", re.MULTILINE),
    "requests_per_s": re.compile(r"^Requests per second:\s+([\d.]+)", re.MULTILINE),
    "seconds": re.compile(r"^Time taken for tests:\s+([\d.]+)", re.MULTILINE),
}
JOB_BODY = {"text": "A burst of requests waits its turn.", "source_lang": "en", "target_lang": "fr"}


def find_ab() -> str:
    """The ``ab`` executable, or exit saying how to install it."""
    found = shutil.which("ab")
    if found is None:
        raise SystemExit("bench.burst needs ApacheBench: apt-get install apache2-utils (Debian, Ubuntu)")
    return found


def _request(base: str, key: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base + path,
        data=data,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        result: dict[str, Any] = json.loads(answer.read())
        return result


def ab_command(ab: str, url: str, key: str, requests: int, concurrency: int, post_file: Path | None) -> list[str]:
    """One ``ab`` run: ``requests`` requests over ``concurrency`` connections, status lines printed."""
    command = [ab, "-q", "-v", "3", "-r", "-s", "60", "-n", str(requests), "-c", str(concurrency)]
    command += ["-H", f"Authorization: Bearer {key}"]
    if post_file is not None:
        command += ["-p", str(post_file), "-T", "application/json"]
    return [*command, url]


def parse_ab(output: bytes) -> dict[str, Any]:
    """Status counts, latency percentiles (ms) and throughput from one ``ab -v 3`` run's output."""
    statuses: dict[str, int] = {}
    for code in _STATUS.findall(output):
        statuses[code.decode()] = statuses.get(code.decode(), 0) + 1
    text = output.decode(errors="replace")
    summary: dict[str, Any] = {}
    for name, pattern in _FIELD.items():
        match = pattern.search(text)
        summary[name] = float(match.group(1)) if match else 0.0
    percentiles = {f"p{p}": int(ms) for p, ms in _PERCENT.findall(text)}
    count = sum(statuses.values())
    return {
        "responses": count,
        "status_counts": dict(sorted(statuses.items())),
        "2xx": sum(n for code, n in statuses.items() if code.startswith("2")),
        "4xx": sum(n for code, n in statuses.items() if code.startswith("4")),
        "5xx": sum(n for code, n in statuses.items() if code.startswith("5")),
        "ab_failed": int(summary["failed"]),
        "ab_non_2xx": int(summary["non_2xx"]),
        "ab_complete": int(summary["complete"]),
        "requests_per_s": summary["requests_per_s"],
        "seconds": summary["seconds"],
        "latency_ms": {name: percentiles[name] for name in ("p50", "p90", "p99", "p100") if name in percentiles},
    }


def run_pair(commands: list[list[str]]) -> tuple[list[dict[str, Any]], float]:
    """Both ``ab`` commands at the same time; each one's parsed result, and the seconds both took."""
    started = time.monotonic()
    with ThreadPoolExecutor(len(commands)) as pool:
        outputs = list(pool.map(lambda c: subprocess.run(c, capture_output=True, check=False), commands))
    elapsed = time.monotonic() - started
    results = []
    for completed in outputs:
        if completed.returncode != 0 and b"Complete requests" not in completed.stdout:
            raise SystemExit(f"ab failed: {completed.stderr.decode(errors='replace')[-2000:]}")
        results.append(parse_ab(completed.stdout))
    return results, elapsed


def scenario_commands(
    ab: str, name: str, base: str, tenants: dict[str, dict[str, str]], args: argparse.Namespace, post_file: Path
) -> list[list[str]]:
    """The two ``ab`` commands of scenario ``name``, tenant A's first."""
    commands = []
    for index, (label, tenant) in enumerate(tenants.items()):
        post = name == "post-job" or (name == "mixed" and index == 0)
        if post:
            url, body = f"{base}/v1/jobs", post_file
        elif name == "models":
            url, body = f"{base}/v1/models", None
        else:
            url, body = f"{base}/v1/jobs/{tenant['job']}", None
        commands.append(ab_command(ab, url, tenant["key"], args.requests, args.concurrency, body))
        del label
    return commands


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every scenario on one set of servers and one API process."""
    ab = find_ab()
    extra_env = dict(item.split("=", 1) for item in args.env)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-burst-") as temp, benchmark_servers() as urls:
        settings = Settings(
            redis_url=urls.redis_url, database_url=urls.database_url, key_prefix=f"bench-{uuid.uuid4().hex[:8]}"
        )
        post_file = Path(temp) / "job.json"
        post_file.write_text(json.dumps(JOB_BODY))
        run_tag = uuid.uuid4().hex[:6]
        tenants = {label: {"key": api_key(settings, f"burst-{label}-{run_tag}")} for label in ("A", "B")}
        saved = {name: os.environ.get(name) for name in extra_env}
        os.environ.update(extra_env)
        try:
            with api_process(settings, Path(temp) / "api.log") as base:
                for tenant in tenants.values():
                    tenant["job"] = _request(base, tenant["key"], "/v1/jobs", JOB_BODY)["id"]
                    _request(base, tenant["key"], f"/v1/jobs/{tenant['job']}")
                for name in args.scenarios:
                    commands = scenario_commands(ab, name, base, tenants, args, post_file)
                    (a, b), elapsed = run_pair(commands)
                    total = a["responses"] + b["responses"]
                    results[name] = {
                        "tenant_A": a,
                        "tenant_B": b,
                        "responses": total,
                        "non_2xx": total - a["2xx"] - b["2xx"],
                        "5xx": a["5xx"] + b["5xx"],
                        "requests_per_s": round(total / elapsed, 1),
                    }
                    print(
                        f"{name:9} {total:6} answers  non-2xx {results[name]['non_2xx']:5}  "
                        f"5xx {results[name]['5xx']:5}  "
                        f"A p50/p99 {a['latency_ms'].get('p50')}/{a['latency_ms'].get('p99')} ms  "
                        f"B p50/p99 {b['latency_ms'].get('p50')}/{b['latency_ms'].get('p99')} ms  "
                        f"{results[name]['requests_per_s']:.0f} requests/s",
                        flush=True,
                    )
                    time.sleep(args.pause)
                log = (Path(temp) / "api.log").read_text(errors="replace")
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return {
        "label": args.label,
        "requests_per_tenant": args.requests,
        "concurrency_per_tenant": args.concurrency,
        "env": extra_env,
        "scenarios": results,
        "api_log_errors": sum(1 for line in log.splitlines() if " ERROR " in line or "Traceback" in line),
        "api_log_tail": log.splitlines()[-5:],
    }


def main() -> None:
    """Run the scenarios, print one line each, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2_000, help="requests per tenant and scenario")
    parser.add_argument("--concurrency", type=int, default=500, help="concurrent connections per tenant")
    parser.add_argument(
        "--scenarios",
        type=lambda text: [s for s in text.split(",") if s],
        default=list(SCENARIOS),
        help=f"comma-separated, of {', '.join(SCENARIOS)}",
    )
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the API process (repeatable)")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between scenarios (connections close)")
    parser.add_argument("--label", default="", help="what this run measures (before, after)")
    parser.add_argument("--out", type=Path, default=Path("bench/out/burst.json"))
    args = parser.parse_args()
    unknown = set(args.scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}; choose from {', '.join(SCENARIOS)}")
    result = run(args)
    result["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "when": time.strftime("%F %R"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
