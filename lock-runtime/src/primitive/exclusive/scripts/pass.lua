local held = redis.call('GET', KEYS[1])
if held ~= ARGV[1] and held ~= ARGV[1] .. '~' then
    return {0, 0}
end
local mark = string.sub(held, -1) == '~'
redis.call('SET', KEYS[1], ARGV[2] .. (mark and '~' or ''), 'PX', ARGV[3])
local now = redis.call('TIME')
local fence = tonumber(now[1] .. string.format('%06d', now[2]))
if fence <= tonumber(ARGV[4]) then
    fence = tonumber(ARGV[4]) + 1
end
return {mark and 2 or 1, fence}
