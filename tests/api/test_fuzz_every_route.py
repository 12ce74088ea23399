"""A property-based fuzz run of every route and method in the OpenAPI schema: zero 5xx, zero tracebacks (issue 48).

Schemathesis reads the app's own schema (``/openapi.json``: the native routes, OpenAI's, and the DeepL and
LibreTranslate doors, whose JSON and form bodies :mod:`api.door_bodies` describes) and makes requests for
each operation: its coverage cases (each field at its bounds and broken in each way, required ones left
out, the path's other HTTP methods), then examples Hypothesis generates, valid and broken; each one that
names a resource in its path is sent again with a real one (a job, a run, a document...). They go over
HTTP to the real ``dragoman api`` app served by uvicorn, on the embedded Redis and PostgreSQL, with a
tenant's key, and with a worker (the deterministic engine) and ``dragoman rq-worker`` running, so that
translations and documents are answered rather than timed out.

Every answer must be below 500, and nothing may be logged with a traceback or at error level: not by the
API, uvicorn or the worker in this process, nor by the rq-worker (its log is read as it is written).
Derandomized (the same requests every run) and bounded per operation, to stay near half a minute on two
cores. For a longer hunt by hand, ``FUZZ_EXAMPLES=200`` asks for more examples per operation and
``FUZZ_RANDOM=1`` for other requests each run (``pytest -s`` prints how many were sent, by status).
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
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

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
    real_ids: dict[str, str] = field(default_factory=dict)
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


def _created(response: requests.Response, field: str = "id") -> str:
    assert response.status_code in (200, 201, 202), response.text
    value = response.json()[field]
    assert isinstance(value, str)
    return value


def _real_ids(url: str, session: requests.Session) -> dict[str, str]:
    """One of each resource a path names, made through the API: a job, a run, a document, a glossary, a file, a
    batch, a live model; the fuzz run sends each case again with these in its path, past the 404s."""
    job = {"text": "Good morning.", "source_lang": "en", "target_lang": "fr"}
    line = {"custom_id": "a", "method": "POST", "url": "/v1/translations", "body": job}
    jsonl = {"Content-Type": "application/x-ndjson"}
    file_id = _created(
        session.post(f"{url}/v1/files", data={"purpose": "batch"}, files={"file": ("in.jsonl", json.dumps(line))})
    )
    document_id = _created(
        session.post(f"{url}/v1/documents?source_lang=en&target_lang=fr&format=txt", data=b"Hello world.")
    )
    glossary = {"name": "fuzz", "source_lang": "EN", "target_lang": "FR", "entries": "hello\tbonjour"}
    models = session.get(f"{url}/v1/models").json()["data"]
    return {
        "job_id": _created(session.post(f"{url}/v1/jobs", json=job)),
        "run_id": _created(session.post(f"{url}/v1/runs", data=json.dumps({**job, "custom_id": "a"}), headers=jsonl)),
        "document_id": document_id,
        "name": f"{document_id}.hello.txt",  # LibreTranslate's download name: the document id, then the file name
        "glossary_id": _created(session.post(f"{url}/v2/glossaries", json=glossary), "glossary_id"),
        "file_id": file_id,
        "batch_id": _created(
            session.post(f"{url}/v1/batches", json={"input_file_id": file_id, "endpoint": "/v1/translations"})
        ),
        **({"model_id": models[0]["id"]} if models else {}),
    }


def _with_real_ids(case: schemathesis.Case, real_ids: dict[str, str]) -> bool:
    """Put real ids in ``case``'s path (every path parameter must have one); whether it has a path to put them in."""
    names = list(case.path_parameters or {})
    if not names or any(name not in real_ids for name in names):
        return False
    case.path_parameters = {name: real_ids[name] for name in names}
    return True


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
                fuzz = FuzzTarget(url, session, watch, rq_log, real_ids=_real_ids(url, session))
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


DERANDOMIZED = "FUZZ_RANDOM" not in os.environ


def _coverage_cases(operation: schemathesis.APIOperation) -> Iterator[schemathesis.Case]:
    """Schemathesis's deterministic cases of ``operation``: each field at its bounds and broken in each way, required
    ones left out, the other HTTP methods on its path."""
    config = SCHEMA.config.generation_for(operation=operation)
    return SCHEMA.iter_coverage_cases(operation, generation_modes=list(GenerationMode), generation_config=config)


def _fuzz(operation: schemathesis.APIOperation, target: FuzzTarget) -> None:
    """Send ``operation`` its coverage cases, then :data:`EXAMPLES` generated ones (valid and broken), each again
    with real ids in its path where it names resources."""
    for case in _coverage_cases(operation):
        _send_with_real_ids(case, target)
    cases = st.one_of(operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE))

    @settings(
        max_examples=EXAMPLES,
        derandomize=DERANDOMIZED,
        database=None,
        deadline=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(cases)
    def generated(case: schemathesis.Case) -> None:
        _send_with_real_ids(case, target)

    generated()


def test_every_route_answers_every_request_below_500_without_a_traceback(target: FuzzTarget) -> None:
    """Every operation of the schema, one after the other, in one test: one xdist worker runs them all on one API,
    worker and rq-worker (Schemathesis's own pytest items share one node id each under pytest 9: xdist cannot
    schedule them). Every operation runs; the failures are listed together."""
    failures = []
    for result in SCHEMA.get_all_operations():
        operation = result.ok()
        try:
            _fuzz(operation, target)
        except Exception as exc:  # an assertion, shrunk by Hypothesis: the next operation still runs
            failures.append(f"{operation.label}: {_described(exc)}")
    assert failures == [], "\n\n".join(failures)
    assert target.statuses.get(200, 0) > 0 and target.requests > 1_000, target.statuses


def _described(exc: BaseException) -> str:
    """What failed: the assertion's message, or each of the distinct failures Hypothesis found."""
    if isinstance(exc, BaseExceptionGroup):
        return "\n".join(_described(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {str(exc)[:1500]}"


def _send_with_real_ids(case: schemathesis.Case, target: FuzzTarget) -> None:
    """Send ``case``, and again with real ids in its path if it names resources (past the 404s)."""
    _send(case, target)
    if _with_real_ids(case, target.real_ids):
        _send(case, target)


def _send(case: schemathesis.Case, target: FuzzTarget) -> None:
    """Send ``case``; fail on a 5xx answer or on anything logged with a traceback meanwhile."""
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
