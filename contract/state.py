"""The Redis state record of a queued or running job, and the scripts that move it.

Each transition is one Lua script, so it is atomic with whatever it checks: a submit writes the
state record and the stream entry together (and honours the idempotency key), a cancel only
cancels a job that is still queued, and a worker only starts a job that was not cancelled.
"""

from __future__ import annotations

from collections.abc import Mapping

from contract.schemas import Job, JobStatus, timestamp_to_datetime

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

# Marks a whole batch of jobs running in one call (one command instead of one per job).
# KEYS: the jobs' state records.  ARGV: now, consumer name, state TTL, then created_at, source,
# target for each job. Returns {status the job had, attempts} for each job, flattened:
# 'cancelled' means do not run it; anything else means it is now 'running' (a missing record,
# from a producer that only XADDs, is created).
START_SCRIPT = """
local out = {}
for i, key in ipairs(KEYS) do
  local status = redis.call('HGET', key, 'status')
  if status == 'cancelled' then
    out[#out + 1] = status
    out[#out + 1] = redis.call('HGET', key, 'attempts') or '0'
  else
    local base = 3 + (i - 1) * 3
    if not status then
      redis.call('HSET', key, 'created_at', ARGV[base + 1], 'source_lang', ARGV[base + 2],
                 'target_lang', ARGV[base + 3])
      status = 'missing'
    end
    redis.call('HSET', key, 'status', 'running', 'started_at', ARGV[1], 'consumer', ARGV[2])
    out[#out + 1] = status
    out[#out + 1] = redis.call('HINCRBY', key, 'attempts', 1)
    redis.call('EXPIRE', key, ARGV[3])
  end
end
return out
"""

# Finishes a batch whose rows are committed: XACK every entry, finalise the state records,
# append the events and publish them, count them in the current second's counter, and note
# the jobs of runs and documents; all in one atomic call. The job that completes a run or
# document (its set of finished jobs reaches the total) appends one entry to the completions
# stream: exactly once, however often a job is delivered.
# KEYS: jobs stream, events stream, this second's finished counter, completions stream, then
# the state record of each event.
# ARGV: group, channel, finished TTL, events maxlen, schema version, number of entry ids, the
# entry ids, then for each event: job id, status, finished_at, error, payload JSON, and the
# hash and done-set keys of its run/document ("" when it has none).
FINISH_SCRIPT = """
local n_entries = tonumber(ARGV[6])
for i = 7, 6 + n_entries, 500 do
  redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, i, math.min(i + 499, 6 + n_entries)))
end
local base = 6 + n_entries
for k = 5, #KEYS do
  local j = base + (k - 5) * 7
  redis.call('HSET', KEYS[k], 'status', ARGV[j + 2], 'finished_at', ARGV[j + 3], 'error', ARGV[j + 4])
  redis.call('EXPIRE', KEYS[k], ARGV[3])
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'v', ARGV[5], 'id', ARGV[j + 1],
             'status', ARGV[j + 2], 'payload', ARGV[j + 5])
  redis.call('PUBLISH', ARGV[2], ARGV[j + 5])
  local group, done = ARGV[j + 6], ARGV[j + 7]
  if group ~= '' and redis.call('SADD', done, ARGV[j + 1]) == 1 then
    local info = redis.call('HMGET', group, 'total', 'kind', 'id')
    if info[1] and redis.call('SCARD', done) == tonumber(info[1]) then
      redis.call('XADD', KEYS[4], '*', 'kind', info[2], 'id', info[3])
    end
  end
end
if #KEYS > 4 then
  redis.call('INCRBY', KEYS[3], #KEYS - 4)
  redis.call('EXPIRE', KEYS[3], 120)
end
return n_entries
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
