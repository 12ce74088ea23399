-- Cancels one job if it is still queued; asks the worker running it to abort it if it runs.
-- Either way the record loses its TTL: a cancel must hold until a worker reaches the job's
-- entry and FINISH writes the final row and gives the record the finished TTL (START answers
-- 'cancelled' for both, so the job is recorded cancelled instead of run).
-- KEYS: state record
-- ARGV: now, control channel, job id
-- Returns 'cancelled', 'cancel_requested' (running: 'cancel <job id>' is published on the
-- control channel), 'missing', or the final status that prevented the cancel.
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 'missing' end
if status == 'running' then
  redis.call('HSET', KEYS[1], 'cancel_requested', '1')
  redis.call('PERSIST', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'cancel ' .. ARGV[3])
  return 'cancel_requested'
end
if status ~= 'queued' then return status end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'finished_at', ARGV[1])
redis.call('PERSIST', KEYS[1])
return 'cancelled'
