"""Two real workers serving the default model under two names: two models of one deployment, end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from contract.errors import ModelNotFoundError
from contract.models import ModelRoute
from contract.schemas import JobStatus, TranslationRequest
from contract.settings import Settings
from producer import Client

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SMALL_ENGINE = ("--max-num-seqs", "4", "--max-model-len", "512", "--kv-cache-memory-bytes", "256M")
"""Two engines share this 24 GB machine with the suite."""


def _worker(env: dict[str, str], log: Path, *names: str) -> subprocess.Popen[bytes]:
    flags = [arg for name in names for arg in ("--served-model-name", name)]
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker", *flags, *SMALL_ENGINE, "--engines", "1"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def _served(raw_redis: redis.Redis, settings: Settings) -> set[str]:
    beats = [raw_redis.hget(key, "models") for key in raw_redis.scan_iter(match=f"{settings.key_prefix}:worker:*")]
    return {str(models) for models in beats if models}


def test_each_job_is_answered_by_the_model_it_named_or_was_routed_to(
    settings: Settings, raw_redis: redis.Redis, tmp_path: Path
) -> None:
    assert settings.redis_url and settings.database_url
    routed = settings.model_copy(update={"model_routes": [ModelRoute(target="de", model="beta")]})
    env = {
        **os.environ,
        "DRAGOMAN_REDIS_URL": settings.redis_url,
        "DRAGOMAN_DATABASE_URL": settings.database_url,
        "DRAGOMAN_KEY_PREFIX": settings.key_prefix,
        "DRAGOMAN_DATA_DIR": str(settings.data_dir),
        "DRAGOMAN_METRICS_PORT": "0",
        "DRAGOMAN_MEMORY_ENABLED": "false",
    }
    alpha = _worker(env, tmp_path / "alpha.log", "alpha")
    beta = _worker(env, tmp_path / "beta.log", "beta", "b")
    try:
        deadline = time.monotonic() + 600
        while _served(raw_redis, settings) != {"alpha", "beta b"}:
            assert alpha.poll() is None and beta.poll() is None, "a worker exited; see its log"
            assert time.monotonic() < deadline, "the two workers did not start"
            time.sleep(1)
        with Client(routed) as client:
            named = client.submit_many(
                TranslationRequest(f"Sentence {i} is about the weather.", "en", "fr", model=name)
                for i, name in enumerate(["alpha", "b", "alpha", "beta"])
            )
            german = client.submit("The train leaves at noon.", "en", "de")  # routed to beta
            with pytest.raises(ModelNotFoundError):
                client.submit("Hello.", "en", "fr", model="gamma")
            jobs = [client.wait(job_id, timeout=600) for job_id in [*named, german]]
        assert [job.status for job in jobs] == [JobStatus.SUCCEEDED] * 5, [job.error for job in jobs]
        assert [job.model for job in jobs] == ["alpha", "beta", "alpha", "beta", "beta"]
        assert all(job.translation and not job.translation.startswith("[echo]") for job in jobs)
        stats = subprocess.run(
            [sys.executable, "-m", "cli.main", "stats", "--json"], env=env, capture_output=True, text=True, timeout=60
        )
        assert stats.returncode == 0, stats.stderr
        assert set(json.loads(stats.stdout)["models"]) == {"default", "alpha", "beta"}
    finally:
        for worker in (alpha, beta):
            worker.terminate()
        for worker in (alpha, beta):
            try:
                worker.wait(timeout=120)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
