if redis.call('DEL', KEYS[1]) == 0 then
    return 0
end
local now = redis.call('TIME')
local at = now[1] .. string.format('%06d', now[2])
if not pcall(redis.call, ARGV[2], ARGV[1], at) then
    redis.call('PUBLISH', ARGV[1], at)
end
return 1
