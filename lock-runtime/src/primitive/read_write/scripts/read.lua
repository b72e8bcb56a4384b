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

-- Its own member, scored by its deadline; the set lasts as its latest.
local function read_until(deadline)
    redis.call('ZADD', KEYS[2], deadline, token)
    local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
    redis.call('PEXPIRE', KEYS[2], tonumber(last) - now)
end

local mine = tonumber(redis.call('ZSCORE', KEYS[2], token))
if mine and mine > now then
    -- A retry after a lost reply: the read is ours already.
    read_until(now + tonumber(ARGV[2]))
    return {1, fence}
end
if redis.call('EXISTS', KEYS[1]) == 1 then
    return {0, redis.call('PTTL', KEYS[1])}
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local intent = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
if intent[1] then
    return {0, tonumber(intent[2]) - now}
end
-- Readers whose lease ran out leave the set on the way.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
read_until(now + tonumber(ARGV[2]))
return {1, fence}
