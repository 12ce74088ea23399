-- Cancels one job if it is still queued; asks the worker running it to abort it if it runs.
-- KEYS: state record
-- ARGV: now, TTL once final, control channel, job id
-- Returns 'cancelled', 'cancel_requested' (running: 'cancel <job id>' is published on the
-- control channel), 'missing', or the final status that prevented the cancel.
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
