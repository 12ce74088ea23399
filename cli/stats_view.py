"""``dragoman stats``: the queue as a few aligned lines, once or refreshed with ``--watch``.

Every number is the whole deployment's (every shard's, with ``DRAGOMAN_REDIS_SHARDS`` > 1); a
sharded deployment gets a ``shard`` table after them: each shard's length, lag, pending, staged
jobs, finished jobs and dead letters (``--json``: ``shards``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterable
from typing import TextIO

from broker.keys import RedisKeys
from broker.queue_stats import QueueStats, ShardStats, read_queue_stats
from broker.redis_client import open_redis
from contract.services import redact_url

_CLEAR_SCREEN = "\x1b[H\x1b[2J"


def format_queue_stats(stats: QueueStats, redis_label: str) -> str:
    """The snapshot as the terminal view: queue, throughput, dead letters, consumers, live workers."""
    taken = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stats.taken_at))
    lag = "unknown (Redis cannot tell)" if stats.lag is None else f"{'>= ' if stats.lag_capped else ''}{stats.lag:,}"
    oldest = "-" if stats.oldest_pending_age_seconds is None else format_duration(stats.oldest_pending_age_seconds)
    lines = [f"dragoman queue at {redis_label}  ({taken})"]
    # Every lane's stream with its own length: runs and documents wait in the bulk lane's.
    lines += [
        f"  stream {lane.stream:<28} length {lane.length:,}   ({lane.lane} lane of model {lane.model})"
        for lane in stats.lanes
    ]
    if not stats.lanes:
        lines.append(f"  stream {stats.stream:<28} length {stats.length:,}")
    lines.append(
        f"  group  {stats.group:<28} lag {lag}   pending {stats.pending:,}   oldest pending {oldest}"
        + (f"   (every lane, length {stats.length:,})" if len(stats.lanes) > 1 else "")
    )
    if not stats.group_exists:
        lines.append("         (the group does not exist yet: no worker has started on this stream)")
    for lane in stats.lanes:
        lane_lag = "unknown" if lane.lag is None else f"{'>= ' if lane.lag_capped else ''}{lane.lag:,}"
        lane_oldest = (
            "-" if lane.oldest_pending_age_seconds is None else format_duration(lane.oldest_pending_age_seconds)
        )
        waiting = "-" if lane.oldest_waiting_age_seconds is None else format_duration(lane.oldest_waiting_age_seconds)
        lines.append(
            f"  lane   {lane.model + ' ' + lane.lane:<28} lag {lane_lag}   pending {lane.pending:,}   "
            f"oldest pending {lane_oldest}"
            f"   next in line waited {waiting}"
            + (f"   ({lane.staged:,} of the lag staged by tenants)" if lane.staged else "")
        )
    lines += [_model_line(stats, model) for model in stats.models]
    if stats.shard_count > 1:
        lines.append(
            f"  {'shard':<6} {'length':>10} {'lag':>10} {'pending':>9} {'staged':>9} {'finished/min':>13} {'dead':>7}"
        )
        lines += [_shard_line(shard) for shard in stats.shards]
    lines += [
        f"  finished in the last minute          {stats.finished_last_minute:,}  ({stats.jobs_per_second:,.1f} jobs/s)",
        f"  dead letters                         {stats.dead_letters:,}"
        + ("   (see `dragoman dead list`)" if stats.dead_letters else ""),
        "",
        f"  {'consumer':<40} {'pending':>8} {'idle':>10}",
    ]
    lines += [f"  {c.name:<40} {c.pending:>8,} {format_duration(c.idle_seconds):>10}" for c in stats.consumers]
    if not stats.consumers:
        lines.append("  (none)")
    lines += [
        "",
        f"  {'live worker':<40} {'model':<16} {'lanes':>11} {'in flight':>9} {'written':>10} {'reclaimed':>10}"
        "   engine (source)",
    ]
    lines += [
        f"  {w.name:<40} {(w.models[0] if w.models else '-'):<16} {w.lane_policy or '-':>11} {w.in_flight:>9,} "
        f"{w.written:>10,} {w.reclaimed:>10,}" + (f"   {w.engine}" if w.engine else "")
        for w in stats.workers
    ]
    if not stats.workers:
        lines.append("  (none: no worker heartbeat)")
    return "\n".join(lines)


def _model_line(stats: QueueStats, model: str) -> str:
    """One served model: its live workers (and aliases) and its lanes' backlog together."""
    lanes = stats.model_lanes(model)
    workers = [w for w in stats.workers if w.models and w.models[0] == model]
    aliases = sorted({name for w in workers for name in w.models[1:]})
    lags = [lane.lag for lane in lanes]
    lag = "unknown" if None in lags else f"{sum(n for n in lags if n is not None):,}"
    alive = f"{len(workers)} live worker{'s' if len(workers) != 1 else ''}" if workers else "no live worker"
    named = f"   (also named {', '.join(aliases)})" if aliases else ""
    return f"  model  {model:<28} lag {lag}   pending {sum(lane.pending for lane in lanes):,}   {alive}{named}"


def _shard_line(shard: ShardStats) -> str:
    """One shard's numbers (every served model's lanes on it), under the table's head."""
    lag = "?" if shard.lag is None else f"{'>=' if shard.lag_capped else ''}{shard.lag:,}"
    return (
        f"  {shard.shard:<6} {shard.length:>10,} {lag:>10} {shard.pending:>9,} {shard.staged:>9,} "
        f"{shard.finished_last_minute:>13,} {shard.dead_letters:>7,}"
    )


async def show_queue_stats(
    redis_url: str,
    keys: RedisKeys,
    *,
    as_json: bool,
    watch_seconds: float | None,
    out: TextIO | None = None,
    models: Iterable[str] = (),
) -> None:
    """Print the queue once, or every ``watch_seconds`` until interrupted (to ``out``, default stdout).

    ``models``: served models to show beside the registered ones (those the routes name, whose
    jobs may wait before any worker of theirs ever ran)."""
    out = out or sys.stdout
    connection = open_redis(redis_url, socket_timeout=10)
    label = redact_url(redis_url)
    try:
        while True:
            stats = await read_queue_stats(connection, keys, models=models)
            text = json.dumps(stats.to_dict(), indent=2) if as_json else format_queue_stats(stats, label)
            if watch_seconds is not None and not as_json and out.isatty():
                out.write(_CLEAR_SCREEN)
            out.write(text + "\n")
            out.flush()
            if watch_seconds is None:
                return
            await asyncio.sleep(watch_seconds)
    finally:
        await connection.aclose()


def format_duration(seconds: float) -> str:
    """``12.3s``, ``4.5m`` or ``1.2h``: durations in terminal views."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"
