-- Counts a stream's entries after an id, up to a limit (a group's lag, on Redis before 7).
-- KEYS: the stream
-- ARGV: the id to count after (exclusive), the most entries to count
-- Returns the count.
return #redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', ARGV[2])
