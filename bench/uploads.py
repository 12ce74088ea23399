"""Slow uploads against everyone else's files (issue 33): trickling run uploads beside another tenant.

    python -m bench.uploads [--checkout PATH] [--tricklers 50] [--line-seconds 1.0] [--probes 10]
                            [--label after] [--out bench/results/issue33/uploads-after.json]

One real ``dragoman api`` process (from ``--checkout``, default this one: pass a checkout of the
code before the change to measure it) on fresh embedded Redis and PostgreSQL. Tenant A opens
``--tricklers`` ``POST /v1/runs`` from raw sockets and sends one JSONL line every
``--line-seconds`` (the declared length is never reached while the benchmark runs). Once they
are all sending, tenant B makes ``--probes`` rounds of one ``POST /v1/files`` (a small batch
file) and one ``GET /v1/files/{id}/content`` (of a file it uploaded before A began), one after
the other, each timed with its status. The target: every one of B's requests answers 200
within 1 s while A trickles. Nothing else runs (no worker: a run's upload is what is measured,
not its jobs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.api import api_key, api_process
from bench.servers import benchmark_servers
from contract.settings import Settings

TARGET_SECONDS = 1.0
_PROBE_TIMEOUT = 30.0


def _line(n: int) -> bytes:
    return json.dumps({"custom_id": f"c{n}", "text": f"line {n}", "source_lang": "en", "target_lang": "fr"}).encode()


async def trickle(base: str, key: str, every: float, stop: asyncio.Event, sent: list[int]) -> str:
    """One run upload from a raw socket, a line every ``every`` seconds until ``stop``; how it ended."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    lines = 100_000
    length = sum(len(_line(n)) + 1 for n in range(lines))
    writer.write(
        f"POST /v1/runs?target_lang=fr HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/x-ndjson\r\nContent-Length: {length}\r\n\r\n".encode()
    )
    answer = asyncio.create_task(reader.read(4096))
    try:
        for n in range(lines):
            writer.write(_line(n) + b"\n")
            await writer.drain()
            sent[0] += 1
            done, _ = await asyncio.wait(
                {answer, asyncio.create_task(stop.wait())}, timeout=every, return_when=asyncio.FIRST_COMPLETED
            )
            if answer in done:
                return answer.result().split(b"\r\n", 1)[0].decode(errors="replace")
            if stop.is_set():
                return "still sending"
        return "sent everything"
    except ConnectionError as exc:
        return f"connection error: {exc}"
    finally:
        answer.cancel()
        writer.close()


def _batch_file(count: int) -> bytes:
    return b"".join(
        json.dumps(
            {
                "custom_id": f"b{n}",
                "method": "POST",
                "url": "/v1/translations",
                "body": {"text": f"probe {n}", "source_lang": "en", "target_lang": "fr"},
            }
        ).encode()
        + b"\n"
        for n in range(count)
    )


async def upload(http: httpx.AsyncClient, content: bytes) -> httpx.Response:
    """One ``POST /v1/files`` of ``content`` (purpose batch)."""
    return await http.post("/v1/files", files={"file": ("b.jsonl", content)}, data={"purpose": "batch"})


async def probe(http: httpx.AsyncClient, stored: str, content: bytes, rounds: int) -> list[dict[str, Any]]:
    """Tenant B's upload of a new file, then download of the one it ``stored`` before, ``rounds`` times;
    each timed with its status."""
    results = []
    for _ in range(rounds):
        began = time.perf_counter()
        uploaded = await upload(http, content)
        row: dict[str, Any] = {"upload_status": uploaded.status_code, "upload_s": round(time.perf_counter() - began, 4)}
        began = time.perf_counter()
        downloaded = await http.get(f"/v1/files/{stored}/content")
        row["download_status"] = downloaded.status_code
        row["download_s"] = round(time.perf_counter() - began, 4)
        row["download_intact"] = downloaded.content == content
        results.append(row)
        await asyncio.sleep(0.2)
    return results


async def measure(base: str, slow_key: str, other_key: str, args: argparse.Namespace) -> dict[str, Any]:
    """The tricklers, then B's probes while they send; both summarised."""
    content = _batch_file(20)
    http = httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {other_key}"}, timeout=_PROBE_TIMEOUT)
    stored = (await upload(http, content)).raise_for_status().json()["id"]  # before anyone trickles
    stop = asyncio.Event()
    sent = [0]
    tricklers = [
        asyncio.create_task(trickle(base, slow_key, args.line_seconds, stop, sent)) for _ in range(args.tricklers)
    ]
    await asyncio.sleep(max(3.0, 2 * args.line_seconds))  # every trickler has opened its request
    began = time.monotonic()
    try:
        probes = await probe(http, stored, content, args.probes)
    finally:
        await http.aclose()
    probing_s = time.monotonic() - began
    still = sum(not t.done() for t in tricklers)
    stop.set()
    endings = await asyncio.gather(*tricklers)
    uploads = [p["upload_s"] for p in probes]
    downloads = [p["download_s"] for p in probes]
    ok = [p for p in probes if p["upload_status"] == 200 and p.get("download_status") == 200]
    return {
        "probes": probes,
        "probing_seconds": round(probing_s, 2),
        "tricklers_still_sending_after_probes": still,
        "trickler_endings": {ending: endings.count(ending) for ending in sorted(set(endings))},
        "trickled_lines": sent[0],
        "summary": {
            "probes_ok": len(ok),
            "probes": len(probes),
            "upload_statuses": sorted({p["upload_status"] for p in probes}),
            "download_statuses": sorted({p["download_status"] for p in probes}),
            "upload_median_s": round(statistics.median(uploads), 4),
            "upload_max_s": round(max(uploads), 4),
            "download_median_s": round(statistics.median(downloads), 4),
            "download_max_s": round(max(downloads), 4),
            "every_request_ok_within_1s": len(ok) == len(probes)
            and max(uploads) <= TARGET_SECONDS
            and max(downloads) <= TARGET_SECONDS,
        },
    }


def _commit(checkout: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True)
    return done.stdout.strip() or "unknown (not a git checkout)"


def main() -> None:
    """Run the measurement once, print its summary, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, default=Path.cwd(), help="the code whose `dragoman api` runs")
    parser.add_argument("--tricklers", type=int, default=50, help="tenant A's concurrent trickling run uploads")
    parser.add_argument("--line-seconds", type=float, default=1.0, help="seconds between two of a trickler's lines")
    parser.add_argument("--probes", type=int, default=10, help="tenant B's upload+download rounds")
    parser.add_argument("--label", default="after", help="what the checkout is (before, after)")
    parser.add_argument("--commit", help="the checkout's commit, where it is no git checkout (an archive of it)")
    parser.add_argument("--out", type=Path, default=Path("bench/out/uploads.json"))
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    with benchmark_servers() as urls, tempfile.TemporaryDirectory(prefix="dragoman-uploads-") as logs:
        settings = Settings(redis_url=urls.redis_url, database_url=urls.database_url)
        slow_key = api_key(settings, f"slow-{uuid.uuid4().hex[:6]}")
        other_key = api_key(settings, f"other-{uuid.uuid4().hex[:6]}")
        with api_process(settings, Path(logs) / "api.log", checkout=checkout) as base:
            result = asyncio.run(measure(base, slow_key, other_key, args))
    report = {
        "benchmark": "bench.uploads",
        "label": args.label,
        "commit": args.commit or _commit(checkout),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "tricklers": args.tricklers,
        "line_seconds": args.line_seconds,
        **result,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"label": args.label, "commit": report["commit"], **result["summary"]}, indent=2))


if __name__ == "__main__":
    main()
