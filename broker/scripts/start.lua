-- Marks a whole batch of jobs running in one call (one command instead of one per job).
-- KEYS: the jobs' state records
-- ARGV: now, consumer name, state TTL, then created_at, source, target, tenant ('' for none)
--       for each job
-- Returns {status the job had, attempts} for each job, flattened: 'cancelled' means do not run
-- it (it was cancelled while queued, or a cancel was requested while it ran on a worker that
-- then died; the record and its attempts are left as they were, for FINISH to finalise);
-- anything else means it is now 'running', with one more attempt ('missing': the record, from
-- a producer that only XADDs, or one that expired while the job waited, was created, with the
-- entry's tenant so that the job's owner still finds it).
local out = {}
for i, key in ipairs(KEYS) do
  local record = redis.call('HMGET', key, 'status', 'cancel_requested', 'attempts')
  local status = record[1]
  if status == 'cancelled' or record[2] == '1' then
    out[#out + 1] = 'cancelled'
    out[#out + 1] = record[3] or '0'
  else
    local base = 3 + (i - 1) * 4
    if not status then
      redis.call('HSET', key, 'created_at', ARGV[base + 1], 'source_lang', ARGV[base + 2],
                 'target_lang', ARGV[base + 3])
      if ARGV[base + 4] ~= '' then redis.call('HSET', key, 'tenant', ARGV[base + 4]) end
      status = 'missing'
    end
    redis.call('HSET', key, 'status', 'running', 'started_at', ARGV[1], 'consumer', ARGV[2])
    out[#out + 1] = status
    out[#out + 1] = redis.call('HINCRBY', key, 'attempts', 1)
    redis.call('EXPIRE', key, ARGV[3])
  end
end
return out
