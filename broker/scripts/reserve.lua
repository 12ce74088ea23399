-- A tenant's allowance of unfinished jobs, taken atomically: concurrent submissions cannot pass
-- the limit together. The allowance is the tenant's set of unfinished jobs (SUBMIT adds each job,
-- FINISH removes it) plus its reservations: a hash of token -> "jobs not yet in the set:deadline"
-- for submissions too large to name every job at once (a run, a batch), which CLAIM moves into
-- the set a chunk at a time, before those jobs are submitted. Nothing is counted twice: a job is
-- either in a reservation's number or a member of the set, never both; SUBMIT's ZADD of a member
-- already there changes no count.
-- A reserved member is scored so that the set's usual pruning (members older than the state
-- records' TTL) drops it after the lease unless SUBMIT re-scores it with the job's created_at:
-- a submission that dies after reserving frees its jobs by itself.
-- KEYS: the tenant's unfinished-jobs set, the tenant's reservations hash, then per operation:
--   admit:   the idempotency keys of the named jobs that have one
--   release: the state record of each named job
-- ARGV[1] is the operation:
--   admit   now, prune cutoff, limit, token ('' to reserve no count), count to reserve, lease,
--           reserved score, state TTL, n, the tenant's count on its other shards (added to this
--           shard's; '0' with one shard), then n job ids, then n KEYS indexes of their
--           idempotency keys ('0': none). A named job is not counted if its idempotency key is
--           taken (SUBMIT will answer the earlier job) or it is in the set already. Returns
--           {1, count before, named jobs counted} and reserves, or {0, count, named jobs that
--           would count} and changes nothing past the pruning (a limit of -1 only counts).
--   claim   now, token ('' for none), lease, reserved score, state TTL, the number to take off
--           the token's count, then job ids: add them to the set and take the number off the
--           token's count (the ids of a claim are on several shards; each shard's are added there
--           and the whole number is taken off on the tenant's home shard). Returns the count left
--           on the token.
--   release token ('' for none), then job ids: drop the token, and each job whose state record
--           is missing or final (it was never queued, or was already finished). Returns 1.
local set, held = KEYS[1], KEYS[2]
local op = ARGV[1]

local function add_members(score, ids, first, last)
  local pairs_ = {}
  for i = first, last do
    pairs_[#pairs_ + 1] = score
    pairs_[#pairs_ + 1] = ids[i]
    if #pairs_ >= 2000 then
      redis.call('ZADD', set, 'NX', unpack(pairs_))
      pairs_ = {}
    end
  end
  if #pairs_ > 0 then redis.call('ZADD', set, 'NX', unpack(pairs_)) end
end

if op == 'admit' then
  local now, cutoff, limit = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
  local token, counted, lease = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
  local score, state_ttl, n = ARGV[8], ARGV[9], tonumber(ARGV[10])
  redis.call('ZREMRANGEBYSCORE', set, '-inf', cutoff)
  local count = redis.call('ZCARD', set) + tonumber(ARGV[11])
  local fields = redis.call('HGETALL', held)
  for i = 1, #fields, 2 do
    local remaining, deadline = string.match(fields[i + 1], '^(%-?%d+):(.+)$')
    if remaining == nil or tonumber(deadline) < now then
      redis.call('HDEL', held, fields[i])
    else
      count = count + tonumber(remaining)
    end
  end
  local fresh = {}
  for i = 1, n do
    local id, index = ARGV[11 + i], tonumber(ARGV[11 + n + i])
    if (index == 0 or redis.call('EXISTS', KEYS[index]) == 0) and not redis.call('ZSCORE', set, id) then
      fresh[#fresh + 1] = id
    end
  end
  if count + #fresh + counted > limit then return {0, count, #fresh} end
  if #fresh > 0 then
    add_members(score, fresh, 1, #fresh)
    redis.call('EXPIRE', set, state_ttl)
  end
  if token ~= '' and counted > 0 then
    redis.call('HSET', held, token, counted .. ':' .. (now + lease))
    redis.call('EXPIRE', held, lease)
  end
  return {1, count, #fresh}
elseif op == 'claim' then
  local now, token, lease, score, state_ttl = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
  local taken = tonumber(ARGV[7])
  local ids = {}
  for i = 8, #ARGV do ids[#ids + 1] = ARGV[i] end
  if #ids > 0 then
    add_members(score, ids, 1, #ids)
    redis.call('EXPIRE', set, state_ttl)
  end
  if token == '' then return 0 end
  local value = redis.call('HGET', held, token)
  if not value then return 0 end
  local remaining = tonumber(string.match(value, '^(%-?%d+):')) - taken
  if remaining > 0 then
    redis.call('HSET', held, token, remaining .. ':' .. (now + lease))
    redis.call('EXPIRE', held, lease)
  else
    redis.call('HDEL', held, token)
  end
  return remaining
elseif op == 'release' then
  if ARGV[2] ~= '' then redis.call('HDEL', held, ARGV[2]) end
  for i = 3, #ARGV do
    local status = redis.call('HGET', KEYS[i], 'status')
    if not status or status == 'succeeded' or status == 'failed' or status == 'cancelled' then
      redis.call('ZREM', set, ARGV[i])
    end
  end
  return 1
end
return redis.error_reply('reserve.lua: unknown operation ' .. tostring(op))
