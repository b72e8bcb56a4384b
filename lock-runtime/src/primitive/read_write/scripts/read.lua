-- Takes a read: granted unless a writer holds the lock or a writer's
-- intent is alive (writer preference). Idempotent for its token.
-- KEYS[1] writer, KEYS[2] readers, KEYS[3] intents; ARGV[1] owner token,
-- ARGV[2] ttl in ms.
-- Returns {1, fence} when granted, else {0, ms until the lease it waits
-- for ends (-1: unknown)}.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local fence = tonumber(time[1] .. string.format('%06d', time[2]))
local token = ARGV[1]

-- A writer is granted only while no read is alive, so a read that is
-- ours already (a retry after a lost reply) never meets one.
if redis.call('EXISTS', KEYS[1]) == 1 then
    return {0, redis.call('PTTL', KEYS[1])}
end
if redis.call('EXISTS', KEYS[3]) == 1 then
    -- A writer waits: only a read that is ours already goes on.
    local mine = tonumber(redis.call('ZSCORE', KEYS[2], token))
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
    local intent = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    if intent[1] and not (mine and mine > now) then
        return {0, tonumber(intent[2]) - now}
    end
end
-- Its own member, scored by its deadline; the set lasts at least as long
-- as its latest (a set just made has no expiry yet).
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), token)
if redis.call('PEXPIRE', KEYS[2], ARGV[2], 'GT') == 0 then
    redis.call('PEXPIRE', KEYS[2], ARGV[2], 'NX')
end
return {1, fence}
