local held = redis.call('GET', KEYS[1])
if held ~= ARGV[1] and held ~= ARGV[1] .. '~' then
    return 0
end
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
local highest = tonumber(ARGV[2])
if counter < 1000000000000000 then
    local now = redis.call('TIME')
    highest = math.max(highest, tonumber(now[1] .. string.format('%06d', now[2])))
end
if counter < highest then
    redis.call('SET', KEYS[2], string.format('%.0f', highest))
end
return 1
