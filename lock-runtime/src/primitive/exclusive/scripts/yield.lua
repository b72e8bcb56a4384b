local held = redis.call('GET', KEYS[1])
if held ~= ARGV[1] and held ~= ARGV[1] .. '~' then
    return 0
end
redis.call('SET', KEYS[1], ARGV[2] .. '^', 'PX', ARGV[3])
local now = redis.call('TIME')
local at = now[1] .. string.format('%06d', now[2]) .. ':' .. ARGV[2]
if ARGV[5] == 'PUBLISH' then
    redis.call('PUBLISH', ARGV[4], at)
elseif not pcall(redis.call, ARGV[5], ARGV[4], at) then
    redis.call('PUBLISH', ARGV[4], at)
end
return 1
