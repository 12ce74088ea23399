"""A worker process with the deterministic engine, for fault-injection tests that kill it.

    python -m tests.worker.worker_process DELAY_SECONDS MAX_IN_FLIGHT

Settings come from the DRAGOMAN_* environment, like ``dragoman worker``. Each translation is
the source text followed by `` #<pid>``, so a test can tell which process produced a row.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from contract.settings import Settings
from storage.embedded import resolve_urls
from worker.deterministic_engine import DeterministicEngine
from worker.profiles import IdentityProfile
from worker.service import Worker


async def main(delay: float, max_in_flight: int) -> int:
    """Run until SIGTERM (or until killed, which is the point)."""
    settings = Settings()
    urls = resolve_urls(settings)
    engine = DeterministicEngine(delay_s=delay, tag=f" #{os.getpid()}")
    worker = Worker(
        settings,
        redis_url=urls.redis_url,
        database_url=urls.database_url,
        engine=engine,
        profile=IdentityProfile(engine.tokenizer),
        max_in_flight=max_in_flight,
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    return await worker.serve(stop)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(asyncio.run(main(float(sys.argv[1]), int(sys.argv[2]))))
