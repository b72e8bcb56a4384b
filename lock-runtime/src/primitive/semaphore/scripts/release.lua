-- Gives back the permits an owner token holds, and tells the waiters how
-- many permits are free now; the set goes once no lease is left in it.
-- KEYS[1] the semaphore; ARGV[1] owner token, ARGV[2] release channel,
-- ARGV[3] the publish command (`PUBLISH`, or `SPUBLISH` on a cluster).
-- Returns 1 when the token held permits, 0 otherwise.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local key, token = KEYS[1], ARGV[1]
local deadline = tonumber(redis.call('ZSCORE', key, token))
redis.call('ZREM', key, token)
redis.call('ZREMRANGEBYSCORE', key, '(0', now)
-- Its claims, and those of leases that ended, leave with them.
local held = 0
local claims = redis.call('ZRANGEBYSCORE', key, '-inf', '(0')
for _, claim in ipairs(claims) do
    local owner = string.match(claim, '^%d+#(.*)$')
    if owner and redis.call('ZSCORE', key, owner) then
        held = held + 1
    else
        redis.call('ZREM', key, claim)
    end
end
local recorded = redis.call('ZRANGEBYSCORE', key, 0, 0)[1]
if redis.call('ZCOUNT', key, '(0', '+inf') == 0 then
    redis.call('DEL', key)
end
if not deadline or deadline <= now then
    return 0
end
local limit = held
if recorded then
    limit = tonumber(string.sub(recorded, 2))
end
-- Named by its token's digest: on Redlock every master tells it, and a
-- process wakes its waiters once.
local message = time[1] .. string.format('%06d', time[2]) .. ';f=' .. (limit - held)
    .. ';by=' .. redis.sha1hex(token)
if ARGV[3] == 'PUBLISH' then
    redis.call('PUBLISH', ARGV[2], message)
elseif not pcall(redis.call, ARGV[3], ARGV[2], message) then
    redis.call('PUBLISH', ARGV[2], message)
end
return 1
