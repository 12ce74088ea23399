-- Queues a dead letter again, exactly once: the job goes back on the jobs stream with a fresh
-- 'queued' state record (no attempts), and the dead-letter entry is deleted. Run twice (two
-- operators retrying the same entry), the second run finds the entry gone and changes nothing.
-- XADD is the first write, so a failure (a key of another type) leaves nothing behind.
-- A tenant's job gets its tenant back in the record and in the tenant's unfinished-jobs set.
-- KEYS: dead-letter stream, jobs stream, state record[, the tenant's unfinished-jobs set]
-- ARGV: dead-letter entry id, job id, schema version, payload, created_at, source, target,
--       state TTL, tenant ('' for none)
-- Returns the new jobs-stream entry id, or false (nil) when the dead letter was not there.
if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 0 then return false end
local entry_id = redis.call('XADD', KEYS[2], '*', 'v', ARGV[3], 'id', ARGV[2], 'payload', ARGV[4])
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'status', 'queued', 'created_at', ARGV[5],
           'source_lang', ARGV[6], 'target_lang', ARGV[7], 'attempts', '0')
redis.call('EXPIRE', KEYS[3], ARGV[8])
if ARGV[9] ~= '' then
  redis.call('HSET', KEYS[3], 'tenant', ARGV[9])
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[2])
  redis.call('EXPIRE', KEYS[4], ARGV[8])
end
redis.call('XDEL', KEYS[1], ARGV[1])
return entry_id
