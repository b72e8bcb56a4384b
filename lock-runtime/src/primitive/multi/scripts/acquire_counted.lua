-- Redlock: takes every lock key of one master for one owner, or none of
-- them, and counts the grant on the master's fence counter, as the
-- exclusive lock's `acquire_counted.lua` does for one key.
--
-- `KEYS[1..n]` lock keys, `KEYS[n+1]` the fence counter, `KEYS[n+2]` the
-- restart quarantine's up mark; `ARGV[1]` owner token, `ARGV[2]` ttl in
-- ms, `ARGV[3]` the quarantine in ms.
-- Returns `{1, fence, quarantine left}` when the owner holds every key
-- there now, or `{0, pttl, now in µs, i}` when `KEYS[i]` is someone
-- else's (marked, so that its release is announced), and nothing was
-- taken. The engine's `quarantine.lua` is prepended.
local n = #KEYS - 2
local token = ARGV[1]
local marked = token .. '~'
local values = {}
for i = 1, n do
    local held = redis.call('GET', KEYS[i])
    values[i] = held
    if held and held ~= token and held ~= marked then
        if string.sub(held, -1) ~= '~' then
            redis.call('APPEND', KEYS[i], '~')
        end
        local now = redis.call('TIME')
        return {0, redis.call('PTTL', KEYS[i]), tonumber(now[1] .. string.format('%06d', now[2])), i}
    end
end
local left = quarantine_left(KEYS[n + 2], ARGV[3])
local fence = redis.call('INCR', KEYS[n + 1])
if fence < 1000000000000000 then
    local now = redis.call('TIME')
    local seed = now[1] .. string.format('%06d', now[2])
    if tonumber(seed) > fence then
        redis.call('SET', KEYS[n + 1], seed)
        fence = tonumber(seed)
    end
end
for i = 1, n do
    if values[i] then
        redis.call('PEXPIRE', KEYS[i], ARGV[2])
    else
        redis.call('SET', KEYS[i], token, 'PX', ARGV[2])
    end
end
return {1, fence, left}
