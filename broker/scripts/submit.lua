-- Queues one job: the jobs-stream entry and its state record together, honouring the
-- application's idempotency key (an id already recorded under it is returned instead).
-- Scripts do not roll back: XADD goes first, so a failure (say, the stream key holds another
-- type) leaves nothing behind; the writes after it cannot fail on keys of the right type.
-- A tenant's job is also added to the tenant's set of unfinished jobs (FINISH removes it): the
-- HTTP API's per-key limit on queued jobs counts it.
-- Fair share (issue 33; ARGV[13] non-empty, tenants' jobs only): the job goes into the lane only
-- when the tenant has nothing staged for it and the lane holds fewer than ARGV[13] unread entries
-- (after the consumer group's last-delivered id); otherwise into the tenant's staging stream, the
-- tenant joining the lane's rotation if it was not in it. REFILL moves staged entries into the
-- lane by deficit round robin. Fields are the same in either stream.
-- KEYS: jobs stream, state record[, idempotency key][, the tenant's unfinished-jobs set
--       [, the tenant's staging stream, the lane's rotation, the tenant weights (fair share only)]]
-- ARGV: job id, payload, created_at, source, target, state TTL, idempotency TTL, schema version,
--       tenant ('' for none: the record then has no tenant field and no set is given), only-new
--       flag ("1": a job whose state record exists is left as it is, so submitting a run's or
--       document's deterministic ids again adds only the jobs that are missing), idempotency
--       flag ("1": KEYS[3] is the idempotency key), model ('' for none: the default model's lanes),
--       fair-share buffer ('' for off), consumer group, tenant weight ('' to leave the recorded one)
-- Returns the job id (the first job's, for an idempotency key already used).
if ARGV[10] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then return ARGV[1] end
if ARGV[11] == '1' then
  local existing = redis.call('GET', KEYS[3])
  if existing then return existing end
end
local queued = ARGV[11] == '1' and 4 or 3  -- the tenant's unfinished-jobs set, when there is a tenant
local stage = false
if ARGV[9] ~= '' and ARGV[13] ~= '' and ARGV[13] ~= nil then
  local staged = redis.call('XLEN', KEYS[queued + 1])
  if staged > 0 then
    stage = true
  else
    local buffer = tonumber(ARGV[13])
    -- XLEN first: a lane shorter than the buffer cannot hold that many unread entries.
    if redis.call('XLEN', KEYS[1]) >= buffer then
      local unread = nil
      for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
        local info = {}
        for i = 1, #group, 2 do info[group[i]] = group[i + 1] end
        if info['name'] == ARGV[14] then
          unread = #redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+', 'COUNT', buffer)
        end
      end
      stage = unread == nil or unread >= buffer  -- no consumer group yet: every entry is unread
    end
  end
  if stage then
    redis.call('XADD', KEYS[queued + 1], '*', 'v', ARGV[8], 'id', ARGV[1], 'payload', ARGV[2])
    if staged == 0 and not redis.call('LPOS', KEYS[queued + 2], ARGV[9]) then
      redis.call('RPUSH', KEYS[queued + 2], ARGV[9])
    end
    if ARGV[15] ~= '' then redis.call('HSET', KEYS[queued + 3], ARGV[9], ARGV[15]) end
  end
end
if not stage then redis.call('XADD', KEYS[1], '*', 'v', ARGV[8], 'id', ARGV[1], 'payload', ARGV[2]) end
-- One HSET with every field (a table built per call cost more than the branches).
if ARGV[9] == '' then
  if ARGV[12] == '' then
    redis.call('HSET', KEYS[2], 'status', 'queued', 'created_at', ARGV[3], 'source_lang', ARGV[4],
               'target_lang', ARGV[5], 'attempts', '0')
  else
    redis.call('HSET', KEYS[2], 'status', 'queued', 'created_at', ARGV[3], 'source_lang', ARGV[4],
               'target_lang', ARGV[5], 'attempts', '0', 'model', ARGV[12])
  end
else
  if ARGV[12] == '' then
    redis.call('HSET', KEYS[2], 'status', 'queued', 'created_at', ARGV[3], 'source_lang', ARGV[4],
               'target_lang', ARGV[5], 'attempts', '0', 'tenant', ARGV[9])
  else
    redis.call('HSET', KEYS[2], 'status', 'queued', 'created_at', ARGV[3], 'source_lang', ARGV[4],
               'target_lang', ARGV[5], 'attempts', '0', 'tenant', ARGV[9], 'model', ARGV[12])
  end
  redis.call('ZADD', KEYS[queued], ARGV[3], ARGV[1])
  redis.call('EXPIRE', KEYS[queued], ARGV[6])
end
redis.call('EXPIRE', KEYS[2], ARGV[6])
if ARGV[11] == '1' then redis.call('SET', KEYS[3], ARGV[1], 'EX', ARGV[7]) end
return ARGV[1]
