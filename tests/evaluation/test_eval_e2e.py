"""``dragoman eval`` on the real CPU engine and the default model: a small catalogue, scored end to end."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from broker.heartbeats import model_has_live_worker
from broker.keys import RedisKeys
from cli.main import main
from contract.services import ServiceUrls
from contract.settings import Settings
from tests.waiting import until
from tests.worker.conftest import default_model_worker
from worker.vllm_engine import VllmEngine

# The session's loop: the shared real engine (``default_engine``, tests/conftest.py) serves the loop that first used it.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900), pytest.mark.asyncio(loop_scope="session")]

CATALOGUE = r"""msgid ""
msgstr ""
"Language: fr\n"
"Content-Type: text/plain; charset=UTF-8\n"

msgid "Good morning."
msgstr "Bonjour."

msgid "The file was not found."
msgstr "Le fichier est introuvable."

msgid "Do you want to continue?"
msgstr "Voulez-vous continuer ?"

#, fuzzy
msgid "Skipped: a fuzzy entry."
msgstr "Ignoré."

msgid "Thank you very much."
msgstr "Merci beaucoup."
"""


async def test_eval_scores_the_default_model_on_the_cpu_engine(
    default_engine: VllmEngine,
    settings_env: Settings,
    service_urls: ServiceUrls,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    catalogue = tmp_path / "fr.po"
    catalogue.write_text(CATALOGUE, encoding="utf-8")
    # A worker on the shared engine (a `dragoman worker` process's own engine start is what
    # tests/worker/test_worker_command.py pays for); eval finds it live by its heartbeat, as it would a process.
    worker = default_model_worker(settings_env, service_urls, default_engine, max_in_flight=8)
    await worker.start()
    try:
        # Live once it has joined its lanes' consumer group, on its first read (eval refuses a model with none).
        keys = RedisKeys.from_settings(settings_env)
        async with aioredis.Redis.from_url(service_urls.redis_url, decode_responses=True) as redis:
            await until(lambda: model_has_live_worker(redis, keys, settings_env.default_model), "the worker live")
        report_file = tmp_path / "report.json"
        argv = ["eval", str(catalogue), "--from", "en", "--json-out", str(report_file)]
        assert await asyncio.to_thread(main, argv) == 0  # off the loop: the worker runs on it
    finally:
        await worker.stop(grace_seconds=30)
    text = capsys.readouterr().out
    assert "dragoman eval: 4 segments" in text and "en->fr" in text
    assert "chrF++: nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:" in text
    report = json.loads(report_file.read_text(encoding="utf-8"))
    pair = report["systems"][0]["pairs"][0]
    assert pair["segments"] == 4 and pair["target_lang"] == "fr"
    outputs = [result["outputs"][settings_env.default_model] for result in report["results"]]
    succeeded = [output for output in outputs if output["status"] == "succeeded"]
    assert succeeded, [output["error"] for output in outputs]
    assert all(output["translation"] and not output["translation"].startswith("[echo]") for output in succeeded)
    assert all(output["error"] for output in outputs if output["status"] != "succeeded")  # failures say why
    assert pair["failed"] == 4 - len(succeeded)
    assert 0 < pair["scores"]["chrF++"]["score"] <= 100  # a tiny base model: low, but a real translation scores
