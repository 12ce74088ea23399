"""How a worker process runs: uvloop's event loop, and a start-up heap the collector leaves alone."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_event_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` on uvloop where it is installed (it comes with vLLM), else on asyncio's loop.

    The worker's hot path is socket reads and writes to Redis and PostgreSQL and one task per
    job; uvloop does those with less Python per event.
    """
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def freeze_startup_heap() -> None:
    """Exclude everything allocated so far (the engine, torch, the tokenizer) from garbage collection.

    Once the engine is up, the process holds millions of long-lived objects, and every full
    collection triggered by the jobs' short-lived dicts and lists would walk all of them again.
    Call it once, after start-up and before jobs flow.
    """
    gc.collect()
    gc.freeze()
