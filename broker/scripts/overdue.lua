-- A lane's overdue entries: those a consumer group has not delivered yet that have waited at least a
-- given time, and how long the next one to be delivered has waited. One round trip, no scan: the
-- group's last-delivered id, then at most COUNT entries after it. Ages come from the server's clock,
-- the one that stamped the entry ids.
-- KEYS: the stream
-- ARGV: the group, the age in milliseconds from which an entry is overdue, the most entries to count
-- Returns {overdue entries (up to the limit), age in ms of the next entry to be delivered (-1: none waits)}.
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[1])
if groups.err then
  return {0, -1}  -- no such stream: nothing waits
end
local after = '-'  -- no such group yet: every entry waits
for _, group in ipairs(groups) do
  local name, last
  for i = 1, #group, 2 do
    if group[i] == 'name' then
      name = group[i + 1]
    elseif group[i] == 'last-delivered-id' then
      last = group[i + 1]
    end
  end
  if name == ARGV[1] then
    after = '(' .. last
    break
  end
end
local first = redis.call('XRANGE', KEYS[1], after, '+', 'COUNT', 1)
if #first == 0 then
  return {0, -1}
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local age = math.max(0, now - tonumber(string.match(first[1][1], '^(%d+)')))
local min_age = tonumber(ARGV[2])
if age < min_age then
  return {0, age}
end
local cutoff = string.format('%.0f', now - min_age)
return {#redis.call('XRANGE', KEYS[1], after, cutoff, 'COUNT', ARGV[3]), age}
