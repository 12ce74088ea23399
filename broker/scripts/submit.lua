-- Queues one job: the jobs-stream entry and its state record together, honouring the
-- application's idempotency key (an id already recorded under it is returned instead).
-- Scripts do not roll back: XADD goes first, so a failure (say, the stream key holds another
-- type) leaves nothing behind; the writes after it cannot fail on keys of the right type.
-- A tenant's job is also added to the tenant's set of unfinished jobs (FINISH removes it): the
-- HTTP API's per-key limit on queued jobs counts it.
-- KEYS: jobs stream, state record[, idempotency key][, the tenant's unfinished-jobs set]
-- ARGV: job id, payload, created_at, source, target, state TTL, idempotency TTL, schema version,
--       tenant ('' for none: the record then has no tenant field and no set is given), only-new
--       flag ("1": a job whose state record exists is left as it is, so submitting a run's or
--       document's deterministic ids again adds only the jobs that are missing), idempotency
--       flag ("1": KEYS[3] is the idempotency key), model ('' for none: the default model's lanes)
-- Returns the job id (the first job's, for an idempotency key already used).
if ARGV[10] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then return ARGV[1] end
if ARGV[11] == '1' then
  local existing = redis.call('GET', KEYS[3])
  if existing then return existing end
end
redis.call('XADD', KEYS[1], '*', 'v', ARGV[8], 'id', ARGV[1], 'payload', ARGV[2])
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
  redis.call('ZADD', KEYS[#KEYS], ARGV[3], ARGV[1])
  redis.call('EXPIRE', KEYS[#KEYS], ARGV[6])
end
redis.call('EXPIRE', KEYS[2], ARGV[6])
if ARGV[11] == '1' then redis.call('SET', KEYS[3], ARGV[1], 'EX', ARGV[7]) end
return ARGV[1]
