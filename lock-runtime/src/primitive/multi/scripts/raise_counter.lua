-- Redlock: confirms that every lock key of one master is still the
-- owner's and raises the master's fence counter to the fence handed out,
-- as the exclusive lock's `raise_counter.lua` does for one key.
--
-- `KEYS[1..n]` lock keys, `KEYS[n+1]` the fence counter; `ARGV[1]` owner
-- token, `ARGV[2]` the fence. Returns 1 when every key was the owner's
-- (the counter then stands at least at the fence), else 0.
local n = #KEYS - 1
for i = 1, n do
    local held = redis.call('GET', KEYS[i])
    if held ~= ARGV[1] and held ~= ARGV[1] .. '~' then
        return 0
    end
end
local counter = tonumber(redis.call('GET', KEYS[n + 1]) or '0')
local highest = tonumber(ARGV[2])
if counter < 1000000000000000 then
    local now = redis.call('TIME')
    highest = math.max(highest, tonumber(now[1] .. string.format('%06d', now[2])))
end
if counter < highest then
    redis.call('SET', KEYS[n + 1], string.format('%.0f', highest))
end
return 1
