-- Takes a read: granted unless a writer holds the lock, or a writer's
-- intent is alive outside the readers' turn (writer preference, with a
-- turn for the readers who waited: see `release.lua`). Idempotent for its
-- token. A reader that may wait and is refused keeps a place among the
-- waiting readers: a short lease, renewed while it waits.
-- KEYS[1] writer, KEYS[2] readers, KEYS[3] intents, KEYS[4] waiting
-- readers, KEYS[5] the readers' turn; ARGV[1] owner token, ARGV[2] ttl in
-- ms, ARGV[3] a place's lease in ms, ARGV[4] `1` to wait (`0`: a single
-- try, which keeps no place).
-- Returns {1, fence} when granted, else {0, ms until the lease it waits
-- for ends (-1: unknown), 1 when it keeps a place else 0}.
-- On a Redlock master (`quarantine_left` prepended, see
-- `engine/quarantine.lua`), also KEYS[6] the master's up mark and
-- ARGV[5] the restart quarantine in ms; a grant is then
-- {1, fence, quarantine left in ms}.
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

local function refused(left)
    if ARGV[4] ~= '1' then
        return {0, left, 0}
    end
    redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), token)
    if redis.call('PEXPIRE', KEYS[4], ARGV[3], 'GT') == 0 then
        redis.call('PEXPIRE', KEYS[4], ARGV[3], 'NX')
    end
    return {0, left, 1}
end

-- A writer is granted only while no read is alive, so a read that is
-- ours already (a retry after a lost reply) never meets one.
if redis.call('EXISTS', KEYS[1]) == 1 then
    return refused(redis.call('PTTL', KEYS[1]))
end
if redis.call('EXISTS', KEYS[3]) == 1 and redis.call('EXISTS', KEYS[5]) == 0 then
    -- A writer waits: only a read that is ours already goes on.
    local mine = tonumber(redis.call('ZSCORE', KEYS[2], token))
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
    local intent = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    if intent[1] and not (mine and mine > now) then
        return refused(tonumber(intent[2]) - now)
    end
end
-- Its own member, scored by its deadline; the set lasts at least as long
-- as its latest (a set just made has no expiry yet).
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), token)
if redis.call('PEXPIRE', KEYS[2], ARGV[2], 'GT') == 0 then
    redis.call('PEXPIRE', KEYS[2], ARGV[2], 'NX')
end
if redis.call('EXISTS', KEYS[4]) == 1 then
    -- It waited: it leaves the waiting readers; the readers' turn ends
    -- once none of them is left waiting.
    redis.call('ZREM', KEYS[4], token)
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
    if redis.call('EXISTS', KEYS[4]) == 0 then
        redis.call('DEL', KEYS[5])
    end
end
return granted()
