redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
local now = redis.call('TIME')
local fence = tonumber(now[1] .. string.format('%06d', now[2]))
if fence <= tonumber(ARGV[4]) then
    fence = tonumber(ARGV[4]) + 1
end
return {1, fence}
