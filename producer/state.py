"""The Redis state record of a queued or running job, and the scripts that move it.

Each transition is one Lua script, so it is atomic with whatever it checks: a submit writes the
state record and the stream entry together (and honours the idempotency key), a cancel only
cancels a job that is still queued, and a worker only starts a job that was not cancelled.
"""

from __future__ import annotations

from collections.abc import Mapping

from producer.schemas import Job, JobStatus, timestamp_to_datetime

# Scripts do not roll back: XADD goes first, so a failure (say, the stream key holds another
# type) leaves nothing behind; the writes after it cannot fail on keys of the right type.
# KEYS: jobs stream, state record[, idempotency key]
# ARGV: job id, payload, created_at, source, target, state TTL, idempotency TTL, schema version
SUBMIT_SCRIPT = """
if #KEYS == 3 then
  local existing = redis.call('GET', KEYS[3])
  if existing then return existing end
end
redis.call('XADD', KEYS[1], '*', 'v', ARGV[8], 'id', ARGV[1], 'payload', ARGV[2])
redis.call('HSET', KEYS[2], 'status', 'queued', 'created_at', ARGV[3],
           'source_lang', ARGV[4], 'target_lang', ARGV[5], 'attempts', '0')
redis.call('EXPIRE', KEYS[2], ARGV[6])
if #KEYS == 3 then redis.call('SET', KEYS[3], ARGV[1], 'EX', ARGV[7]) end
return ARGV[1]
"""

# KEYS: state record.  ARGV: now, TTL once final, control channel, job id.
# Returns 'cancelled', 'cancel_requested' (running: the worker running it is told to abort it),
# 'missing', or the final status that prevented the cancel.
CANCEL_SCRIPT = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status == 'running' then
  redis.call('HSET', KEYS[1], 'cancel_requested', '1')
  redis.call('PUBLISH', ARGV[3], 'cancel ' .. ARGV[4])
  return 'cancel_requested'
end
if status ~= 'queued' then return status end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'finished_at', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 'cancelled'
"""

# KEYS: state record.  ARGV: now, consumer name, state TTL, created_at, source, target.
# Returns {status the job had, attempts}: 'cancelled' means do not run it; anything else means
# it is now 'running' (a missing record, from a producer that only XADDs, is created).
START_SCRIPT = """
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'cancelled' then return {status, redis.call('HGET', KEYS[1], 'attempts') or '0'} end
if not status then
  redis.call('HSET', KEYS[1], 'created_at', ARGV[4], 'source_lang', ARGV[5], 'target_lang', ARGV[6])
  status = 'missing'
end
redis.call('HSET', KEYS[1], 'status', 'running', 'started_at', ARGV[1], 'consumer', ARGV[2])
local attempts = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {status, attempts}
"""


def state_to_job(job_id: str, state: Mapping[str, str]) -> Job:
    """The public :class:`Job` view of a state record."""
    return Job(
        id=job_id,
        status=JobStatus(state.get("status", JobStatus.QUEUED)),
        source_lang=state.get("source_lang"),
        target_lang=state.get("target_lang"),
        error=state.get("error") or None,
        attempts=int(state.get("attempts") or 0),
        created_at=timestamp_to_datetime(state.get("created_at")),
        started_at=timestamp_to_datetime(state.get("started_at")),
        finished_at=timestamp_to_datetime(state.get("finished_at")),
    )
