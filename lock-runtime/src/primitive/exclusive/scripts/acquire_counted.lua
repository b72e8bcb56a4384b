local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] and held ~= ARGV[1] .. '~' then
    if string.sub(held, -1) ~= '~' then
        redis.call('APPEND', KEYS[1], '~')
    end
    local now = redis.call('TIME')
    return {0, redis.call('PTTL', KEYS[1]), tonumber(now[1] .. string.format('%06d', now[2]))}
end
local left = quarantine_left(KEYS[3], ARGV[3])
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
