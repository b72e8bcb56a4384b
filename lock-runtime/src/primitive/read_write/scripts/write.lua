-- Takes the write: granted when no writer holds the lock and no reader's
-- lease is alive. A waiting writer that is refused keeps its intent: a
-- short lease, renewed while it waits, that turns new readers away.
-- Idempotent for its token.
-- KEYS[1] writer, KEYS[2] readers, KEYS[3] intents, KEYS[4] waiting
-- readers, KEYS[5] the readers' turn (while it lasts, no writer is
-- granted: see `release.lua`); ARGV[1] owner token,
-- ARGV[2] ttl in ms, ARGV[3] an intent's lease in ms, ARGV[4] `1` to wait
-- (`0`: a single try, which leaves no intent).
-- Returns {1, fence} when granted, else {0, ms until the lease it waits
-- for ends, 1 when it keeps an intent else 0}.
-- On a Redlock master, also KEYS[6] and ARGV[5], as for `read.lua`.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local fence = tonumber(time[1] .. string.format('%06d', time[2]))
local token = ARGV[1]
-- A grant; on a Redlock master, with its restart quarantine left.
local function granted()
    if KEYS[6] then
        return {1, fence, quarantine_left(KEYS[6], ARGV[5])}
    end
    return {1, fence}
end

local held = redis.call('GET', KEYS[1])
if held == token then
    -- A retry after a lost reply: the write is ours already.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    redis.call('ZREM', KEYS[3], token)
    return granted()
end
local reading = {}
if redis.call('EXISTS', KEYS[2]) == 1 then
    -- Readers whose lease ran out leave the set on the way.
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
    reading = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
end
local turn = not held and redis.call('PTTL', KEYS[5]) or -2
if not held and not reading[1] and turn < 0 then
    redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
    redis.call('ZREM', KEYS[3], token)
    return granted()
end
local left
if held then
    left = redis.call('PTTL', KEYS[1])
elseif reading[1] then
    left = tonumber(reading[2]) - now
else
    left = turn
end
if ARGV[4] ~= '1' then
    return {0, left, 0}
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), token)
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2]
redis.call('PEXPIRE', KEYS[3], tonumber(last) - now)
return {0, left, 1}
