local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return 1
end
if held ~= ARGV[1] .. '~' then
    return 0
end
redis.call('DEL', KEYS[1])
local now = redis.call('TIME')
local at = now[1] .. string.format('%06d', now[2])
if ARGV[3] == 'PUBLISH' then
    redis.call('PUBLISH', ARGV[2], at)
elseif not pcall(redis.call, ARGV[3], ARGV[2], at) then
    redis.call('PUBLISH', ARGV[2], at)
end
return 1
