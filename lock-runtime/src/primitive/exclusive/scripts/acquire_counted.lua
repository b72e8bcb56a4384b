local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] and held ~= ARGV[1] .. '~' then
    if string.sub(held, -1) ~= '~' then
        redis.call('APPEND', KEYS[1], '~')
    end
    local now = redis.call('TIME')
    return {0, redis.call('PTTL', KEYS[1]), tonumber(now[1] .. string.format('%06d', now[2]))}
end
local left = 0
local quarantine = tonumber(ARGV[3])
local mark = redis.call('GET', KEYS[3]) or ''
local fresh_for = tonumber(string.match(mark, '^fresh:(%d+)$') or '-1')
if fresh_for >= quarantine then
    left = math.max(redis.call('PTTL', KEYS[3]), 1)
elseif fresh_for < 0 and (tonumber(mark) or -1) >= quarantine then
    left = 0
else
    local info = redis.call('INFO', 'server')
    local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)') or '-1')
    if up >= 0 and up * 1000 < quarantine then
        left = quarantine - up * 1000
        redis.call('SET', KEYS[3], 'fresh:' .. ARGV[3], 'PX', left)
    else
        redis.call('SET', KEYS[3], ARGV[3])
    end
end
local fence = redis.call('INCR', KEYS[2])
if fence < 1000000000000000 then
    local now = redis.call('TIME')
    local seed = now[1] .. string.format('%06d', now[2])
    if tonumber(seed) > fence then
        redis.call('SET', KEYS[2], seed)
        fence = tonumber(seed)
    end
end
if held then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return {1, fence, left}
