"""Two real workers serving the default model under two names: two models of one deployment, end to end."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
import redis

from contract.errors import ModelNotFoundError
from contract.models import ModelRoute
from contract.schemas import JobStatus, TranslationRequest
from contract.services import ServiceUrls
from contract.settings import Settings
from producer import Client
from tests.child_env import child_env
from worker.vllm_engine import VllmEngine

from .conftest import default_model_worker, wait_all

# The session's loop: the shared real engine (``default_engine``, tests/conftest.py) serves the loop that first used it.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900), pytest.mark.asyncio(loop_scope="session")]


def _served(raw_redis: redis.Redis, settings: Settings) -> set[str]:
    beats = [raw_redis.hget(key, "models") for key in raw_redis.scan_iter(match=f"{settings.key_prefix}:worker:*")]
    return {str(models) for models in beats if models}


async def test_each_job_is_answered_by_the_model_it_named_or_was_routed_to(
    default_engine: VllmEngine, settings: Settings, service_urls: ServiceUrls, raw_redis: redis.Redis
) -> None:
    """Two workers, each with its own ``served_model_names``, on the shared engine (one engine start, not two:
    the ``--served-model-name`` flag of a ``dragoman worker`` process is tests/cli/test_eval_command.py's)."""
    routed = settings.model_copy(update={"model_routes": [ModelRoute(target="de", model="beta")]})
    alpha = default_model_worker(
        settings.model_copy(update={"served_model_names": ["alpha"]}), service_urls, default_engine, max_in_flight=8
    )
    beta = default_model_worker(
        settings.model_copy(update={"served_model_names": ["beta", "b"]}), service_urls, default_engine, max_in_flight=8
    )
    await alpha.start()
    await beta.start()
    try:
        assert _served(raw_redis, settings) == {"alpha", "beta b"}
        with Client(routed) as client:
            named = client.submit_many(
                TranslationRequest(f"Sentence {i} is about the weather.", "en", "fr", model=name)
                for i, name in enumerate(["alpha", "b", "alpha", "beta"])
            )
            german = client.submit("The train leaves at noon.", "en", "de")  # routed to beta
            with pytest.raises(ModelNotFoundError):
                client.submit("Hello.", "en", "fr", model="gamma")
            jobs = await wait_all(client, [*named, german])
        assert [job.status for job in jobs] == [JobStatus.SUCCEEDED] * 5, [job.error for job in jobs]
        assert [job.model for job in jobs] == ["alpha", "beta", "alpha", "beta", "beta"]
        assert all(job.translation and not job.translation.startswith("[echo]") for job in jobs)
        stats = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "cli.main", "stats", "--json"],
            env=child_env(settings),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert stats.returncode == 0, stats.stderr
        assert set(json.loads(stats.stdout)["models"]) == {"default", "alpha", "beta"}
    finally:
        await beta.stop(grace_seconds=30)
        await alpha.stop(grace_seconds=30)
