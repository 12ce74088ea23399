-- Moves staged entries of tenants into their lane by deficit round robin (fair share, issue 33).
-- The lane never holds more unread entries than its readers are about to ask for: at most
-- ARGV[1] minus the lane's unread entries (those after the consumer group's last-delivered id)
-- are moved. The tenant at the head of the rotation starts a turn with quantum x weight entries
-- (its deficit), moves them in its own order (XADD to the lane and XDEL from staging in this one
-- script: an entry is moved, never lost or copied twice), then goes to the tail; a turn cut short
-- because the read wanted no more keeps its deficit for the next call. A tenant whose staging
-- stream is empty leaves the rotation in the same script that saw it empty (a submit after that
-- adds it again). Only the staging streams named in KEYS are touched: when the head of the
-- rotation is a tenant the caller did not name, the script stops and the caller goes round again
-- with the tenants it returns.
-- KEYS: the lane, its rotation, its deficits, the tenant weights, then one staging stream per
--       tenant named in ARGV (same order)
-- ARGV: the entries the caller is about to read, consumer group, quantum, how many tenants of the
--       rotation to return, then the tenants whose staging streams are in KEYS
-- Returns {entries moved, unread entries the lane held before, then the first tenants of the
-- rotation as it is left}; {0, 0} when no tenant has staged entries.
if redis.call('LLEN', KEYS[2]) == 0 then return {0, 0} end
local want = tonumber(ARGV[1])
local unread = 0
local length = redis.call('XLEN', KEYS[1])
if length > 0 then
  unread = nil
  for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local info = {}
    for i = 1, #group, 2 do info[group[i]] = group[i + 1] end
    if info['name'] == ARGV[2] then
      unread = #redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+', 'COUNT', want)
    end
  end
  if unread == nil then unread = math.min(length, want) end  -- no consumer group yet: all unread
end
local staging = {}
for i = 5, #ARGV do staging[ARGV[i]] = KEYS[i] end
local quantum = tonumber(ARGV[3])
local left = want - unread
local moved = 0
while left > 0 do
  local tenant = redis.call('LINDEX', KEYS[2], 0)
  if not tenant then break end
  local key = staging[tenant]
  if not key then break end
  local deficit = tonumber(redis.call('HGET', KEYS[3], tenant) or '0') or 0
  if deficit <= 0 then
    local weight = tonumber(redis.call('HGET', KEYS[4], tenant) or '1') or 1
    if weight < 1 then weight = 1 end
    deficit = quantum * math.floor(weight)
  end
  local entries = redis.call('XRANGE', key, '-', '+', 'COUNT', math.min(deficit, left))
  if #entries > 0 then
    local ids = {}
    for i, entry in ipairs(entries) do
      redis.call('XADD', KEYS[1], '*', unpack(entry[2]))
      ids[i] = entry[1]
    end
    redis.call('XDEL', key, unpack(ids))
  end
  moved = moved + #entries
  left = left - #entries
  deficit = deficit - #entries
  if redis.call('XLEN', key) == 0 then
    redis.call('LPOP', KEYS[2])
    redis.call('HDEL', KEYS[3], tenant)
    redis.call('DEL', key)
  elseif deficit <= 0 then
    redis.call('LMOVE', KEYS[2], KEYS[2], 'LEFT', 'RIGHT')
    redis.call('HDEL', KEYS[3], tenant)
  else
    redis.call('HSET', KEYS[3], tenant, deficit)
  end
end
local reply = {moved, unread}
for _, tenant in ipairs(redis.call('LRANGE', KEYS[2], 0, tonumber(ARGV[4]) - 1)) do
  reply[#reply + 1] = tenant
end
return reply
