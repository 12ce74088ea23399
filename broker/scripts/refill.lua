-- Moves staged entries of tenants into their lane by deficit round robin (fair share, issue 33).
-- Nothing is moved while the lane holds at least ARGV[1] unread entries (those after the consumer
-- group's last-delivered id: what the caller is about to read is there already); otherwise the
-- lane is topped up to ARGV[5] (at least ARGV[1]) unread entries, so that a worker reading a few
-- entries at a time pays for a refill once every few reads, not once every read. The tenant at the head of the rotation starts a turn with quantum x weight entries
-- (its deficit), moves them in its own order, then goes to the tail; a turn cut short because the
-- read wanted no more keeps its deficit for the next call. A tenant whose staging stream is
-- emptied leaves the rotation in the same script (a submit after that adds it again). Entries are
-- moved (XADD to the lane, XDEL from staging) in this one script: never lost or copied twice.
-- The turns are planned in Lua first, then carried out with one XRANGE and one XDEL per tenant
-- and one XADD per entry.
-- Only the staging streams named in KEYS are touched: when the head of the rotation is a tenant
-- the caller did not name, the script stops and the caller goes round again with the tenants it
-- returns.
-- KEYS: the lane, its rotation, its deficits, the tenant weights, then one staging stream per
--       tenant named in ARGV (same order)
-- ARGV: the entries the caller is about to read, consumer group, quantum, how many tenants of the
--       rotation to read and return (at least as many as are named), the least number of unread
--       entries a refill leaves, then the named tenants
-- Returns {entries moved, unread entries the lane held before, then the first tenants of the
-- rotation as it is left}; {0, 0} when no tenant has staged entries.
local total = redis.call('LLEN', KEYS[2])
if total == 0 then return {0, 0} end
local want = tonumber(ARGV[1])
local per_call = tonumber(ARGV[4])
local unread = 0
local length = redis.call('XLEN', KEYS[1])
if length > 0 then
  unread = nil
  for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local info = {}
    for i = 1, #group, 2 do info[group[i]] = group[i + 1] end
    if info['name'] == ARGV[2] then
      -- The group's lag (Redis 7) counts them in O(1); it is nil once a deletion makes it unknown, and
      -- only then are they counted by XRANGE (which hands Lua every entry, fields and all: on each
      -- call of a busy worker, most of a refill's cost when it moved nothing).
      local lag = info['lag']
      if type(lag) == 'number' then
        unread = math.min(lag, want)
      else
        unread = #redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+', 'COUNT', want)
      end
    end
  end
  if unread == nil then unread = math.min(length, want) end  -- no consumer group yet: all unread
end
local left = math.max(want, tonumber(ARGV[5])) - unread
if unread >= want then left = 0 end
local names = {}
for i = 6, #ARGV do names[#names + 1] = ARGV[i] end
if left <= 0 or #names == 0 then
  local reply = {0, unread}
  for _, t in ipairs(redis.call('LRANGE', KEYS[2], 0, per_call - 1)) do reply[#reply + 1] = t end
  return reply
end

-- Plan the turns.
local quantum = tonumber(ARGV[3])
local key_of, deficit, weight, staged = {}, {}, {}, {}
local stored_deficits = redis.call('HMGET', KEYS[3], unpack(names))
local stored_weights = redis.call('HMGET', KEYS[4], unpack(names))
for i, t in ipairs(names) do
  key_of[t] = KEYS[4 + i]
  deficit[t] = tonumber(stored_deficits[i]) or 0
  local w = math.floor(tonumber(stored_weights[i]) or 1)
  weight[t] = w < 1 and 1 or w
  staged[t] = redis.call('XLEN', KEYS[4 + i])
end
local queue = redis.call('LRANGE', KEYS[2], 0, per_call - 1)
local more = total > #queue  -- tenants beyond those read: a finished turn goes behind them
local head, tail = 1, {}
local take, turns = {}, {}
local moved = 0
while left > 0 and head <= #queue do
  local t = queue[head]
  if not key_of[t] then break end
  local available = staged[t] - (take[t] or 0)
  if deficit[t] <= 0 then deficit[t] = quantum * weight[t] end
  local n = math.min(deficit[t], left, available)
  if n > 0 then
    take[t] = (take[t] or 0) + n
    turns[#turns + 1] = {t, n}
    left = left - n
    moved = moved + n
    deficit[t] = deficit[t] - n
  end
  if available - n <= 0 then
    deficit[t] = 0  -- nothing left staged: it leaves the rotation
    head = head + 1
  elseif deficit[t] <= 0 then
    deficit[t] = 0
    head = head + 1
    if more then tail[#tail + 1] = t else queue[#queue + 1] = t end
  else
    break  -- the read wants no more: its turn goes on at the next call
  end
end

-- Carry them out.
local entries, next_entry = {}, {}
for t, n in pairs(take) do
  entries[t] = redis.call('XRANGE', key_of[t], '-', '+', 'COUNT', n)
  next_entry[t] = 1
end
for _, turn in ipairs(turns) do
  local t, n = turn[1], turn[2]
  local list, i = entries[t], next_entry[t]
  for j = i, i + n - 1 do redis.call('XADD', KEYS[1], '*', unpack(list[j][2])) end
  next_entry[t] = i + n
end
for t, list in pairs(entries) do
  if staged[t] - #list <= 0 then
    redis.call('DEL', key_of[t])
  else
    local ids = {}
    for j, entry in ipairs(list) do ids[j] = entry[1] end
    redis.call('XDEL', key_of[t], unpack(ids))
  end
end
local reply = {moved, unread}
if more then
  if head > 1 then redis.call('LPOP', KEYS[2], head - 1) end
  if #tail > 0 then redis.call('RPUSH', KEYS[2], unpack(tail)) end
  for _, t in ipairs(redis.call('LRANGE', KEYS[2], 0, per_call - 1)) do reply[#reply + 1] = t end
else
  redis.call('DEL', KEYS[2])
  local left_in_turn = {}
  for i = head, #queue do left_in_turn[#left_in_turn + 1] = queue[i] end
  if #left_in_turn > 0 then redis.call('RPUSH', KEYS[2], unpack(left_in_turn)) end
  for i = 1, math.min(per_call, #left_in_turn) do reply[#reply + 1] = left_in_turn[i] end
end
local keep, drop = {}, {}
for _, t in ipairs(names) do
  if deficit[t] > 0 then
    keep[#keep + 1] = t
    keep[#keep + 1] = deficit[t]
  else
    drop[#drop + 1] = t
  end
end
if #keep > 0 then redis.call('HSET', KEYS[3], unpack(keep)) end
if #drop > 0 then redis.call('HDEL', KEYS[3], unpack(drop)) end
return reply
