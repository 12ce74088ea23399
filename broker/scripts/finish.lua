-- Finishes a batch whose rows are committed: XACK every entry, finalise the state records,
-- append the events and publish them, count them in the current second's counter, and note
-- the jobs of runs and documents; all in one atomic call. The call that completes a run or
-- document (its set of finished jobs reaches the total) appends one entry to the completions
-- stream: exactly once, however often a job is delivered. The done-set expires with the group's
-- hash; the finish task deletes both once the group is final.
-- KEYS: interactive jobs stream, events stream, this second's finished counter, completions
--       stream, bulk jobs stream, then the state record of each event
-- ARGV: group, channel, finished TTL, events maxlen, schema version, number of interactive entry
--       ids, those ids, number of bulk entry ids, those ids, then for each event: job id, status,
--       finished_at, error, payload JSON, the hash and done-set keys of its run/document and its
--       id ("" when it has none); the last two ARGV are the parts of a tenant's unfinished-jobs
--       set name around the tenant
-- An events-stream entry also names the job's tenant (from its state record) and run/document,
-- when it has them, so that a reader can follow one tenant's or one group's jobs.
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
local n_interactive = tonumber(ARGV[6])
ack(KEYS[1], 7, n_interactive)
local n_bulk = tonumber(ARGV[7 + n_interactive])
ack(KEYS[5], 8 + n_interactive, n_bulk)
local n_entries = n_interactive + n_bulk
local base = 7 + n_entries
local tenant_prefix, tenant_suffix = ARGV[#ARGV - 1], ARGV[#ARGV]
local by_tenant, tenants = {}, {}
local by_group, groups = {}, {}
for k = 6, #KEYS do
  local j = base + (k - 6) * 8
  redis.call('HSET', KEYS[k], 'status', ARGV[j + 2], 'finished_at', ARGV[j + 3], 'error', ARGV[j + 4])
  redis.call('EXPIRE', KEYS[k], ARGV[3])
  local fields = {'v', ARGV[5], 'id', ARGV[j + 1], 'status', ARGV[j + 2], 'payload', ARGV[j + 5]}
  local tenant = redis.call('HGET', KEYS[k], 'tenant')
  if tenant then
    fields[#fields + 1] = 'tenant'
    fields[#fields + 1] = tenant
    if not by_tenant[tenant] then
      by_tenant[tenant] = {}
      tenants[#tenants + 1] = tenant
    end
    local members = by_tenant[tenant]
    members[#members + 1] = ARGV[j + 1]
  end
  local group = ARGV[j + 6]
  if group ~= '' then
    fields[#fields + 1] = 'group'
    fields[#fields + 1] = ARGV[j + 8]
    if not by_group[group] then
      by_group[group] = {done = ARGV[j + 7], ids = {}}
      groups[#groups + 1] = group
    end
    local ids = by_group[group].ids
    ids[#ids + 1] = ARGV[j + 1]
  end
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', unpack(fields))
  redis.call('PUBLISH', ARGV[2], ARGV[j + 5])
end
for _, tenant in ipairs(tenants) do
  in_chunks('ZREM', tenant_prefix .. tenant .. tenant_suffix, by_tenant[tenant])
end
for _, group in ipairs(groups) do
  -- A group's hash is gone once it finished (or expired): its done-set is not recreated then.
  if redis.call('EXISTS', group) == 1 then
    local done, ids = by_group[group].done, by_group[group].ids
    local added = 0
    for i = 1, #ids, 500 do
      added = added + redis.call('SADD', done, unpack(ids, i, math.min(i + 499, #ids)))
    end
    if added > 0 then
      local count = redis.call('SCARD', done)
      if count == added then  -- a new done-set expires with its group's hash
        local ttl = redis.call('PTTL', group)
        if ttl > 0 then redis.call('PEXPIRE', done, ttl) end
      end
      -- The call whose members take the count to the total completes the group: exactly once,
      -- since the count was below the total before this atomic call added them.
      local info = redis.call('HMGET', group, 'total', 'kind', 'id')
      local total = tonumber(info[1])
      if total and count >= total and count - added < total then
        redis.call('XADD', KEYS[4], '*', 'kind', info[2], 'id', info[3])
      end
    end
  end
end
if #KEYS > 5 then
  redis.call('INCRBY', KEYS[3], #KEYS - 5)
  redis.call('EXPIRE', KEYS[3], 120)
end
return n_entries
