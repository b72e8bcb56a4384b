-- Renews a batch of leases in one command (the watchdog's round).
--
-- Each entry is one lease, of a kind: `KEYS[i]` its key; `ARGV[3i-2]`
-- its kind, `ARGV[3i-1]` its owner token, `ARGV[3i]` its ttl in ms.
--   `k`: the key holds the token (marked with `~` or not), its expiry is
--        the lease.
--   `m`: the token is a member of the sorted set at the key, its score
--        the lease's deadline (the server's clock, in ms); the set's own
--        expiry is its latest deadline. A member whose deadline passed is
--        no longer ours (removed, answered 0), even before a script
--        reaped it.
-- Returns one 1 (renewed) or 0 (no longer ours) per entry, in order; an
-- entry of a kind this script does not know is an error.
local renewed = {}
local now
for i, key in ipairs(KEYS) do
    local kind, token, ttl = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
    if kind == 'k' then
        local held = redis.call('GET', key)
        if held == token or held == token .. '~' then
            redis.call('PEXPIRE', key, ttl)
            renewed[i] = 1
        else
            renewed[i] = 0
        end
    elseif kind == 'm' then
        if not now then
            local time = redis.call('TIME')
            now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
        end
        local deadline = tonumber(redis.call('ZSCORE', key, token))
        if deadline and deadline > now then
            redis.call('ZADD', key, now + tonumber(ttl), token)
            local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
            redis.call('PEXPIRE', key, tonumber(last[2]) - now)
            renewed[i] = 1
        else
            if deadline then
                redis.call('ZREM', key, token)
            end
            renewed[i] = 0
        end
    else
        return redis.error_reply('a lease of unknown kind ' .. tostring(kind))
    end
end
return renewed
