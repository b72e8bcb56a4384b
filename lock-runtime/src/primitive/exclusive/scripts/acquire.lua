if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local held = redis.call('GET', KEYS[1])
    local kept = held and string.sub(held, -1) == '^'
    if held == ARGV[1] or held == ARGV[1] .. '~' then
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
    elseif kept and held ~= ARGV[3] .. '^' then
        redis.call('SET', KEYS[1], ARGV[1] .. '~', 'PX', ARGV[2])
    else
        if held and not kept and string.sub(held, -1) ~= '~' then
            redis.call('APPEND', KEYS[1], '~')
        end
        return {0, redis.call('PTTL', KEYS[1])}
    end
end
local now = redis.call('TIME')
return {1, tonumber(now[1] .. string.format('%06d', now[2]))}
