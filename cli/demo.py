"""``dragoman demo``: services up, model prepared, a real worker, a handful of translations, all stopped.

Everything it does is what a user would do by hand with the CLI: the worker runs as its own
``dragoman worker`` process and the jobs go through the public :class:`producer.Client`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from broker.heartbeats import any_heartbeat
from broker.keys import RedisKeys
from broker.orchestration import orchestration_redis_url
from broker.redis_client import open_redis
from cli.demo_api import show_curl_round_trip
from cli.embedded import starts_embedded_services
from contract.schemas import Job, JobStatus, TranslationRequest
from contract.services import ServiceUrls, redact_url
from contract.settings import Settings
from producer.client import Client
from storage import upgrade_database
from storage.embedded import EmbeddedServices, ensure_services
from worker.model import is_prepared, prepare_default_model

SAMPLE: list[tuple[str, str, str]] = [
    ("Good morning.", "en", "fr"),
    ("Where can I buy a ticket for the train to Paris?", "en", "fr"),
    ("The meeting has been moved to Thursday afternoon because the director is travelling.", "en", "fr"),
    ("Thank you very much for your help.", "en", "fr"),
    (
        "Our new office is close to the central station, and it has a beautiful view of the river and the old town.",
        "en",
        "fr",
    ),
    ("I like to read books in the evening.", "en", "de"),
    ("The children are playing in the garden while their parents cook dinner.", "en", "de"),
    ("How much does this cost?", "en", "es"),
]

SAMPLE_DOCUMENT = Path(__file__).resolve().parents[1] / "examples" / "getting-started.md"
WORKER_READY_TIMEOUT_S = 600.0
JOB_TIMEOUT_S = 600.0


def run_demo(settings: Settings, python: str) -> int:
    """Run the demo; return the process exit code.

    Embedded services the demo started are stopped again however it ends (a failure included).
    """
    embedded = EmbeddedServices(settings.data_dir)
    started_services = starts_embedded_services(settings)
    urls = ensure_services(settings)
    try:
        return _run_with_services(settings, python, urls, stops_services=started_services)
    finally:
        if started_services:
            embedded.down()


def _run_with_services(settings: Settings, python: str, urls: ServiceUrls, *, stops_services: bool) -> int:
    print(f"[1/5] services: redis {redact_url(urls.redis_url)}, postgres {redact_url(urls.database_url)}")
    upgrade_database(urls.database_url)

    first_time = not is_prepared(settings.model_cache_dir)
    print("[2/5] default model:", "preparing (once, about a minute)..." if first_time else "cached")
    model_path = prepare_default_model(settings.model_cache_dir)
    print(f"      {model_path}")

    log_path = settings.data_dir / "demo-worker.log"
    # The default port may be taken on a desktop; the demo uses a free one unless one was asked for.
    explicit = "metrics_port" in settings.model_fields_set and settings.metrics_port
    metrics_port = settings.metrics_port if explicit else _free_port()
    env = {
        **os.environ,
        "DRAGOMAN_REDIS_URL": urls.redis_url,
        # RQ's single server (a cluster's needs DRAGOMAN_ORCHESTRATION_REDIS_URL: refused here, before anything starts)
        "DRAGOMAN_ORCHESTRATION_REDIS_URL": orchestration_redis_url(settings, urls.redis_url),
        "DRAGOMAN_DATABASE_URL": urls.database_url,
        "DRAGOMAN_METRICS_PORT": str(metrics_port),
        "DRAGOMAN_DATA_DIR": str(settings.data_dir),
    }
    rq_log_path = settings.data_dir / "demo-rq-worker.log"
    print(f"[3/5] starting `dragoman worker` (log: {log_path}); the CPU engine takes about a minute")
    print(f"      and `dragoman rq-worker` for documents (log: {rq_log_path})")
    with open(log_path, "w") as log_file, open(rq_log_path, "w") as rq_log_file:
        worker = subprocess.Popen(
            [python, "-m", "cli.main", "worker", "--max-num-seqs", "16"],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
        )
        orchestrator = subprocess.Popen(
            [python, "-m", "cli.main", "rq-worker"], stdout=rq_log_file, stderr=subprocess.STDOUT, env=env
        )
    try:
        _wait_for_worker(settings, urls.redis_url, worker, log_path)
        code = _translate_sample(settings, urls.redis_url, urls.database_url)
        code = _translate_document(python, env) or code
        print("      the same over HTTP, with curl:")
        code = show_curl_round_trip(python, env, _free_port(), settings.data_dir / "demo-api.log") or code
        _print_metrics(metrics_port)
    finally:
        print("[5/5] stopping the workers" + (" and the embedded services" if stops_services else ""))
        worker_code = _stop(worker)
        orchestrator_code = _stop(orchestrator)
    print(f"      worker exited with code {worker_code}, rq-worker with {orchestrator_code}")
    return code or (1 if worker_code != 0 or orchestrator_code != 0 else 0)


def _stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        return -9


def _translate_document(python: str, env: dict[str, str]) -> int:
    """``dragoman translate`` on the sample Markdown file, as a user would run it."""
    if not SAMPLE_DOCUMENT.exists():  # an installed package without the repository's examples
        return 0
    output = Path(env.get("DRAGOMAN_DATA_DIR", ".dragoman")) / "getting-started.fr.md"
    print(f"      translating {SAMPLE_DOCUMENT.name} (Markdown, en->fr) with `dragoman translate`")
    result = subprocess.run(
        [
            python,
            "-m",
            "cli.main",
            "translate",
            str(SAMPLE_DOCUMENT),
            "--from",
            "en",
            "--to",
            "fr",
            "-o",
            str(output),
            "--no-progress",
        ],
        env=env,
    )
    if result.returncode == 0:
        print(f"      {output}:\n")
        print("        " + output.read_text(encoding="utf-8").replace("\n", "\n        "))
    return result.returncode


def _wait_for_worker(settings: Settings, redis_url: str, worker: subprocess.Popen[bytes], log_path: Path) -> None:
    started = time.monotonic()
    if not asyncio.run(_until_a_worker_beats(RedisKeys.from_settings(settings), redis_url, worker, log_path)):
        tail = "".join(log_path.read_text().splitlines(keepends=True)[-20:])
        raise SystemExit(f"the worker exited with code {worker.returncode}:\n{tail}")
    print(f"      worker ready after {time.monotonic() - started:.0f}s")


async def _until_a_worker_beats(
    keys: RedisKeys, redis_url: str, worker: subprocess.Popen[bytes], log_path: Path
) -> bool:
    """Wait for the first worker heartbeat (True), or the worker process's end (False); exit past the timeout."""
    client = open_redis(redis_url)
    deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
    try:
        while not await any_heartbeat(client, keys):
            if worker.poll() is not None:
                return False
            if time.monotonic() > deadline:
                raise SystemExit(f"the worker was not ready after {WORKER_READY_TIMEOUT_S:.0f}s; see {log_path}")
            await asyncio.sleep(0.5)
        return True
    finally:
        await client.aclose()


def _translate_sample(settings: Settings, redis_url: str, database_url: str) -> int:
    with Client(settings, redis_url=redis_url, database_url=database_url) as client:
        print(f"[4/5] submitting {len(SAMPLE)} sentences")
        start = time.time()
        ids = client.submit_many(TranslationRequest(text, src, tgt) for text, src, tgt in SAMPLE)
        jobs = [client.wait(job_id, timeout=JOB_TIMEOUT_S) for job_id in ids]
    elapsed = max(j.finished_at.timestamp() for j in jobs if j.finished_at) - start
    print()
    for job in jobs:
        _print_job(job)
    succeeded = sum(job.status is JobStatus.SUCCEEDED for job in jobs)
    tokens = sum(job.output_tokens or 0 for job in jobs)
    print(
        f"{succeeded}/{len(jobs)} succeeded in {elapsed:.2f}s: {len(jobs) / elapsed:.2f} jobs/s, "
        f"{tokens / elapsed:.1f} output tokens/s (CPU engine, {jobs[0].model})"
    )
    print()
    return 0 if succeeded == len(jobs) else 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _print_metrics(port: int) -> None:
    """A few lines of the worker's /metrics: what an operator's Prometheus would scrape."""
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    except OSError as exc:
        print(f"      (could not read {url}: {exc})")
        return
    wanted = ("dragoman_jobs_total", "dragoman_output_tokens_total", "vllm:generation_tokens_total")
    print(f"      the worker's {url} (excerpt):")
    for line in text.splitlines():
        if line.startswith(wanted):
            print(f"        {line}")
    print()


def _print_job(job: Job) -> None:
    latency = f"{job.total_seconds:.2f}s" if job.total_seconds is not None else "?"
    print(f"  {job.source_lang}->{job.target_lang}  {latency:>7}  {job.text}")
    if job.status is JobStatus.SUCCEEDED:
        print(f"                  => {job.translation}")
    else:
        print(f"                  !! {job.status.value}: {job.error}")
