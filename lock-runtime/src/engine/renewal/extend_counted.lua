-- Redlock's renewal batch on one master: the leases renewed as by
-- `extend.lua` (of the same kinds), and the master's fence counter raised to every fence of
-- the batch, whether or not this master still holds that lease. Raising
-- is always safe (the fence was handed out, so the counter only catches
-- up with it). A master that came back empty (a counter below the seeded
-- floor) is first seeded from its clock, as a grant would seed it: the
-- batch's fences alone may be older than fences handed out since for
-- other keys (a leader lock held for days), and a counter set to them
-- would hand out lower fences again.
--
-- `KEYS[1]` the counter, `KEYS[i+1]` lease i's key; `ARGV[4i-3]` its
-- kind (as in `extend.lua`), `ARGV[4i-2]` its owner token, `ARGV[4i-1]`
-- its ttl in ms, `ARGV[4i]` its fence.
-- Returns one 1 (renewed) or 0 (not ours here) per lease, in order.
local renewed = {}
local counter = tonumber(redis.call('GET', KEYS[1]) or '0')
local highest = counter
if counter < 1000000000000000 then
    local now = redis.call('TIME')
    highest = tonumber(now[1] .. string.format('%06d', now[2]))
end
local now
for i = 2, #KEYS do
    local at = 4 * (i - 1)
    local kind, token, ttl = ARGV[at - 3], ARGV[at - 2], ARGV[at - 1]
    local fence = tonumber(ARGV[at])
    if fence > highest then
        highest = fence
    end
    if kind == 'k' then
        local held = redis.call('GET', KEYS[i])
        if held == token or held == token .. '~' then
            redis.call('PEXPIRE', KEYS[i], ttl)
            renewed[i - 1] = 1
        else
            renewed[i - 1] = 0
        end
    elseif kind == 'm' then
        if not now then
            local time = redis.call('TIME')
            now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
        end
        local deadline = tonumber(redis.call('ZSCORE', KEYS[i], token))
        if deadline and deadline > now then
            redis.call('ZADD', KEYS[i], now + tonumber(ttl), token)
            local last = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
            redis.call('PEXPIRE', KEYS[i], tonumber(last[2]) - now)
            renewed[i - 1] = 1
        else
            if deadline then
                redis.call('ZREM', KEYS[i], token)
            end
            renewed[i - 1] = 0
        end
    else
        return redis.error_reply('a lease of unknown kind ' .. tostring(kind))
    end
end
if highest > counter then
    redis.call('SET', KEYS[1], string.format('%.0f', highest))
end
return renewed
