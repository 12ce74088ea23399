-- Finishes a batch whose rows are committed: XACK every entry, finalise the state records,
-- append the events (to the shared events stream, and each job's with a tenant to that tenant's own
-- events stream too, trimmed by its count and age) and publish them, count them in the current
-- second's counter, and note
-- the jobs of runs and documents; all in one atomic call. The call that completes a run or
-- document (its set of finished jobs reaches the total) appends one entry to the completions
-- stream: exactly once, however often a job is delivered. The done-set expires with the group's
-- hash; the finish task deletes both once the group is final.
-- Every key it touches is in KEYS (one hash tag: one Redis Cluster slot).
-- KEYS: interactive jobs stream, events stream, this second's finished counter, completions
--       stream, bulk jobs stream, then the state record of each event, then the unfinished-jobs
--       set of each tenant of the batch, then the events stream of each tenant of the batch (same
--       order), then the hash and the done-set of each run/document of the batch
-- ARGV: group, channel, finished TTL, events maxlen, schema version, number of events, number of
--       tenants, number of runs/documents, number of interactive entry ids, those ids, number of
--       bulk entry ids, those ids, then for each event: job id, status, finished_at, error,
--       payload JSON, its tenant's number (1-based, in the order of the tenants' sets; 0: none),
--       its run's/document's number (likewise); then each tenant's name, then each run's/document's
--       id; then a tenant's events stream's maxlen, the oldest entry id it keeps (now less its
--       retention, in ms) and its retention in ms (the stream expires after that long unwritten)
-- An events-stream entry also names the job's tenant and run/document, when it has them, so
-- that a reader can follow one tenant's or one group's jobs.
-- A batch's jobs mostly share one run and one tenant, so the unfinished-jobs sets and the
-- done-sets are updated once per tenant and once per group, with all of the batch's members.
-- Returns the number of entry ids.
local function ack(stream, first, count)
  for i = first, first + count - 1, 500 do
    redis.call('XACK', stream, ARGV[1], unpack(ARGV, i, math.min(i + 499, first + count - 1)))
  end
end
local function in_chunks(command, key, members)
  for i = 1, #members, 500 do
    redis.call(command, key, unpack(members, i, math.min(i + 499, #members)))
  end
end
local n_events, n_tenants, n_groups = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local n_interactive = tonumber(ARGV[9])
ack(KEYS[1], 10, n_interactive)
local n_bulk = tonumber(ARGV[10 + n_interactive])
ack(KEYS[5], 11 + n_interactive, n_bulk)
local n_entries = n_interactive + n_bulk
local base = 10 + n_entries  -- ARGV[base + 1] is the first event's job id
local names = base + n_events * 7  -- ARGV[names + t] is tenant t's name, ARGV[names + n_tenants + g] group g's id
local limits = names + n_tenants + n_groups  -- ARGV[limits + 1..3]: a tenant stream's maxlen, min id, retention ms
local tenant_keys, tenant_events = 5 + n_events, 5 + n_events + n_tenants  -- KEYS offsets
local group_keys = 5 + n_events + 2 * n_tenants
local by_tenant, by_group = {}, {}
for k = 1, n_events do
  local j = base + (k - 1) * 7
  local state = KEYS[5 + k]
  redis.call('HSET', state, 'status', ARGV[j + 2], 'finished_at', ARGV[j + 3], 'error', ARGV[j + 4])
  redis.call('EXPIRE', state, ARGV[3])
  local fields = {'v', ARGV[5], 'id', ARGV[j + 1], 'status', ARGV[j + 2], 'payload', ARGV[j + 5]}
  local tenant = tonumber(ARGV[j + 6])
  if tenant > 0 then
    fields[#fields + 1] = 'tenant'
    fields[#fields + 1] = ARGV[names + tenant]
    local members = by_tenant[tenant] or {}
    by_tenant[tenant] = members
    members[#members + 1] = ARGV[j + 1]
  end
  local group = tonumber(ARGV[j + 7])
  if group > 0 then
    fields[#fields + 1] = 'group'
    fields[#fields + 1] = ARGV[names + n_tenants + group]
    local ids = by_group[group] or {}
    by_group[group] = ids
    ids[#ids + 1] = ARGV[j + 1]
  end
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', unpack(fields))
  if tenant > 0 then
    redis.call('XADD', KEYS[tenant_events + tenant], 'MAXLEN', '~', ARGV[limits + 1], '*', unpack(fields))
  end
  redis.call('PUBLISH', ARGV[2], ARGV[j + 5])
end
for t = 1, n_tenants do
  if by_tenant[t] then
    in_chunks('ZREM', KEYS[tenant_keys + t], by_tenant[t])
    -- The tenant's events older than its retention go (exactly: '~' trims whole nodes only, and a
    -- quiet tenant's stream is one node), and the stream itself once nothing was written to it for
    -- that long. A trim finds nothing to do at the stream's first entry, most calls.
    redis.call('XTRIM', KEYS[tenant_events + t], 'MINID', ARGV[limits + 2])
    redis.call('PEXPIRE', KEYS[tenant_events + t], ARGV[limits + 3])
  end
end
for g = 1, n_groups do
  local ids = by_group[g]
  local hash, done = KEYS[group_keys + 2 * g - 1], KEYS[group_keys + 2 * g]
  -- A group's hash is gone once it finished (or expired): its done-set is not recreated then.
  if ids and redis.call('EXISTS', hash) == 1 then
    local added = 0
    for i = 1, #ids, 500 do
      added = added + redis.call('SADD', done, unpack(ids, i, math.min(i + 499, #ids)))
    end
    if added > 0 then
      local count = redis.call('SCARD', done)
      if count == added then  -- a new done-set expires with its group's hash
        local ttl = redis.call('PTTL', hash)
        if ttl > 0 then redis.call('PEXPIRE', done, ttl) end
      end
      -- The call whose members take the count to the total completes the group: exactly once,
      -- since the count was below the total before this atomic call added them.
      local info = redis.call('HMGET', hash, 'total', 'kind', 'id')
      local total = tonumber(info[1])
      if total and count >= total and count - added < total then
        redis.call('XADD', KEYS[4], '*', 'kind', info[2], 'id', info[3])
      end
    end
  end
end
if n_events > 0 then
  redis.call('INCRBY', KEYS[3], n_events)
  redis.call('EXPIRE', KEYS[3], 120)
end
return n_entries
