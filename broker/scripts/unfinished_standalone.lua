-- A tenant's unfinished stand-alone jobs, newest first, for the job history (GET /v1/jobs).
-- The set of stand-alone jobs (the submitter adds each) is walked down from a score; a member
-- that is no longer in the tenant's unfinished-jobs set (FINISH took it out) is removed as it is
-- passed, so each finished job costs one step of one walk, and a walk's work is the jobs it
-- returns plus those it removes.
-- KEYS: the tenant's stand-alone set, the tenant's unfinished-jobs set
-- ARGV: the highest score to return ('+inf' for any), the most jobs to return
-- Returns {id, score, id, score, ...} (scores as Redis wrote them: exact).
local standalone, queued = KEYS[1], KEYS[2]
local max, count = ARGV[1], tonumber(ARGV[2])
local found = {}
local offset = 0
while #found < 2 * count do
  local page = redis.call('ZREVRANGEBYSCORE', standalone, max, '-inf', 'WITHSCORES', 'LIMIT', offset, count)
  if #page == 0 then break end
  for i = 1, #page, 2 do
    if redis.call('ZSCORE', queued, page[i]) then
      if #found < 2 * count then
        found[#found + 1] = page[i]
        found[#found + 1] = page[i + 1]
      end
      offset = offset + 1
    else
      redis.call('ZREM', standalone, page[i])
    end
  end
end
return found
