"""A property-based fuzz run of every route and method in the OpenAPI schema: zero 5xx, zero tracebacks (issue 48).

Schemathesis reads the app's own schema (``/openapi.json``: the native routes, OpenAI's, and the DeepL and
LibreTranslate doors, whose JSON and form bodies :mod:`api.door_bodies` describes) and Hypothesis
generates requests for each operation, valid and invalid ones (every field's type broken, required ones
left out, unknown ones added). They go over HTTP to the real ``dragoman api`` app served by uvicorn, on the
embedded Redis and PostgreSQL, with a tenant's key, and with a worker (the deterministic engine) and
``dragoman rq-worker`` running, so that translations and documents are answered rather than timed out.

Every answer must be below 500, and nothing may be logged with a traceback or at error level: not by the
API, uvicorn or the worker in this process, nor by the rq-worker (its log is read as it is written).
Derandomized (the same requests every run) and bounded per operation, to stay near half a minute on two
cores. ``FUZZ_EXAMPLES`` (environment) asks for more examples per operation, for a longer hunt by hand.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, settings

from api import create_app
from contract.documents import MEDIA_TYPES
from contract.services import ServiceUrls
from contract.settings import Settings
from contract.sync_bridge import LoopThread
from storage import ApiKeyStore, AsyncConnectionPool
from tests.api.conftest import uvicorn_serving
from tests.conftest import settings_for
from tests.worker.conftest import identity_worker
from worker.deterministic_engine import DeterministicEngine

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
"""Generated requests per operation (and method), besides Schemathesis's explicit examples."""

EVENT_STREAM_SECONDS = 0.3
"""How long a ``/v1/events`` stream is read before the client closes it (an open stream never ends by itself)."""

_SCHEMA_SETTINGS = Settings(redis_url="redis://schema.invalid", database_url="postgresql://schema.invalid/schema")
SCHEMA = schemathesis.openapi.from_dict(create_app(_SCHEMA_SETTINGS).openapi())
"""The app's schema, read without connecting anything (the app connects when it starts)."""


class LogWatch(logging.Handler):
    """Keeps every record that carries a traceback or is at error level (or worse)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.bad: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep ``record`` if it has a traceback (as an exception or as text) or is an error."""
        message = record.getMessage()
        if record.exc_info or record.levelno >= logging.ERROR or "Traceback (most recent call last)" in message:
            self.bad.append(f"{record.levelname} {record.name}: {message[:2000]}")


@dataclass
class FuzzTarget:
    """The served API, a session with the tenant's key, and what is watched."""

    url: str
    session: requests.Session
    log: LogWatch
    rq_log: Path
    rq_log_read: int = 0
    requests: int = 0
    statuses: dict[int, int] = field(default_factory=dict)

    def new_tracebacks(self) -> list[str]:
        """What was logged with a traceback or as an error since the last call, here and by the rq-worker."""
        with self.rq_log.open(errors="replace") as log:
            log.seek(self.rq_log_read)
            rq_text = log.read()
            self.rq_log_read = log.tell()
        bad = self.log.bad + ([rq_text[rq_text.index("Traceback") :][:2000]] if "Traceback" in rq_text else [])
        self.log.bad = []
        return bad


def _rq_worker(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    """``dragoman rq-worker`` on the fuzz run's servers and key prefix, its log into ``log_path``."""
    env = {
        **os.environ,
        "DRAGOMAN_REDIS_URL": settings.redis_url or "",
        "DRAGOMAN_DATABASE_URL": settings.database_url or "",
        "DRAGOMAN_KEY_PREFIX": settings.key_prefix,
        "DRAGOMAN_DATA_DIR": str(settings.data_dir),
    }
    with log_path.open("wb") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "cli.main", "rq-worker"], env=env, stdout=log_file, stderr=subprocess.STDOUT
        )


@pytest.fixture(scope="module")
def target(service_urls: ServiceUrls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzTarget]:
    """The API served by uvicorn with a worker and an rq-worker, a tenant's key, the log watched."""
    folder = tmp_path_factory.mktemp("fuzz")
    settings = settings_for(service_urls, folder / "data").model_copy(update={"api_max_wait_seconds": 30.0})
    loop = LoopThread("fuzz-worker")
    pool = AsyncConnectionPool(service_urls.database_url, max_connections=1)
    tenant = f"fuzz-{uuid.uuid4().hex[:8]}"
    _, key = loop.run(ApiKeyStore(pool).create(tenant, tenant=tenant, rate_limit_per_minute=10_000_000))
    loop.run(pool.close())
    worker = identity_worker(settings, service_urls, DeterministicEngine())
    loop.run(worker.start())
    rq_log = folder / "rq-worker.log"
    rq_worker = _rq_worker(settings, rq_log)
    watch = LogWatch()
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    try:
        with uvicorn_serving(create_app(settings)) as url:
            # uvicorn's own loggers stop at "uvicorn" (it configured them when the server was made): watched there too
            watched = [logging.getLogger(), logging.getLogger("uvicorn")]
            for logger in watched:
                logger.addHandler(watch)
            try:
                fuzz = FuzzTarget(url, session, watch, rq_log)
                yield fuzz
                print(f"\nfuzz run: {fuzz.requests} requests, by status: {dict(sorted(fuzz.statuses.items()))}")
            finally:
                for logger in watched:
                    logger.removeHandler(watch)
    finally:
        session.close()
        rq_worker.terminate()
        rq_worker.wait(timeout=60)
        loop.run(worker.stop(grace_seconds=5))
        loop.close()


@SCHEMA.parametrize()
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_route_answers_every_request_below_500_without_a_traceback(
    case: schemathesis.Case, target: FuzzTarget
) -> None:
    timeout = EVENT_STREAM_SECONDS if case.path == "/v1/events" else 60.0
    response = case.call(base_url=target.url, session=target.session, timeout=timeout)
    target.requests += 1
    target.statuses[response.status_code] = target.statuses.get(response.status_code, 0) + 1
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} answered {response.status_code}: {response.text[:1000]}\n"
        f"{case.as_curl_command()}"
    )
    assert target.new_tracebacks() == [], case.as_curl_command()


@schemathesis.serializer("application/x-ndjson")
def _jsonl(ctx: object, value: object) -> bytes:
    """A run's JSONL body: a generated string as it is, anything else as JSON lines (one per item of a list)."""
    del ctx
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    items = value if isinstance(value, list) else [value]
    return "".join(json.dumps(item) + "\n" for item in items).encode("utf-8", "surrogatepass")


# Documents in the binary formats (and SubRip) are bytes: sent as generated, as an upload of that type would be.
schemathesis.serializer.alias(
    [media for media in MEDIA_TYPES.values() if not media.startswith("text/") and not media.endswith(("json", "+xml"))],
    "application/octet-stream",
)
