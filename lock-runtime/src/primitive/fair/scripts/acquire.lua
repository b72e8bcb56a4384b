-- Takes the fair lock when it is free and this caller is first in line,
-- or keeps the caller's place in line (see `scripts/mod.rs` for the
-- layout of the line).
-- KEYS[1] lock, KEYS[2] line; ARGV[1] owner token, ARGV[2] ttl in ms,
-- ARGV[3] a place's lease in ms, ARGV[4] `1` to wait in line (`0`: a
-- single try, which takes no place).
-- Returns {1, fence} when it finds the lock its own (handed over, or a
-- retry), {1, fence, its arrival in µs, or 0 when nobody alive waited}
-- when it takes the lock, else {0, ms until the lease it waits for ends,
-- 0} for a single try, or {0, that, 1, its arrival in µs} for a caller
-- that holds a place.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local fence = tonumber(time[1] .. string.format('%06d', time[2]))
local token = ARGV[1]

-- The first waiter whose place is alive; arrivals of waiters whose place
-- ran out leave the line on the way, and never block it.
local function first_alive()
    while true do
        local arrival = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(0', 'LIMIT', 0, 1)[1]
        if not arrival then
            return nil
        end
        local waiter = string.sub(arrival, 1, -2)
        local deadline = tonumber(redis.call('ZSCORE', KEYS[2], waiter))
        if deadline and deadline > now then
            return waiter
        end
        redis.call('ZREM', KEYS[2], arrival, waiter)
    end
end

local held = redis.call('GET', KEYS[1])
if held == token then
    -- Ours: handed over by a release, or a retry after a lost reply.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    redis.call('ZREM', KEYS[2], token .. '<', token)
    return {1, fence}
end
-- Who is first matters only while the lock is free: a lock someone holds
-- is handed on by their release, which reads the line itself.
local first
if not held then
    first = first_alive()
    if not first or first == token then
        -- Its arrival when it took the lock as the first in line; 0 when
        -- nobody alive waited (its own place, if any, ran out).
        local arrived = 0
        if first == token then
            arrived = tonumber(redis.call('ZSCORE', KEYS[2], token .. '<')) + 1e16
        end
        redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
        redis.call('ZREM', KEYS[2], token .. '<', token)
        return {1, fence, arrived}
    end
end
-- Not its turn: the lease it waits for is the owner's, or (the lock free,
-- its first waiter yet to take it) that waiter's place.
local left = redis.call('PTTL', KEYS[1])
if left < 0 and first then
    left = tonumber(redis.call('ZSCORE', KEYS[2], first)) - now
end
if ARGV[4] ~= '1' then
    return {0, left, 0}
end
local arrival = tonumber(redis.call('ZSCORE', KEYS[2], token .. '<'))
local place = tonumber(redis.call('ZSCORE', KEYS[2], token))
if not place or place <= now then
    -- No live place: it arrives now. (The arrival of a place that ran
    -- out, not reaped yet, would put it back ahead of the waiters that
    -- kept theirs.)
    arrival = nil
end
if not arrival then
    -- Its arrival: when the server first saw it wait (µs), below zero.
    arrival = fence - 1e16
    redis.call('ZADD', KEYS[2], string.format('%.0f', arrival), token .. '<')
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), token)
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
redis.call('PEXPIRE', KEYS[2], tonumber(last) - now)
return {0, left, 1, arrival + 1e16}
