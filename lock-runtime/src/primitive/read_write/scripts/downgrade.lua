-- Turns the token's write into a read in one step: there is no moment
-- when it holds neither. Readers waiting are woken at once unless a
-- writer waits (writer preference holds across a downgrade too).
-- KEYS[1] writer, KEYS[2] readers, KEYS[3] intents; ARGV[1] owner token,
-- ARGV[2] ttl in ms, ARGV[3] the write's fence, ARGV[4] the readers'
-- channel, ARGV[5] the publish command.
-- Returns {1, fence} (above the write's), or {0} when the write was no
-- longer the token's.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local token = ARGV[1]
if redis.call('GET', KEYS[1]) ~= token then
    return {0}
end
redis.call('DEL', KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), token)
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
redis.call('PEXPIRE', KEYS[2], tonumber(last) - now)
local fence = tonumber(time[1] .. string.format('%06d', time[2]))
if fence <= tonumber(ARGV[3]) then
    fence = tonumber(ARGV[3]) + 1
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if redis.call('EXISTS', KEYS[3]) == 0 then
    local message = time[1] .. string.format('%06d', time[2]) .. ';all;by='
        .. redis.sha1hex(token)
    if ARGV[5] == 'PUBLISH' then
        redis.call('PUBLISH', ARGV[4], message)
    elseif not pcall(redis.call, ARGV[5], ARGV[4], message) then
        redis.call('PUBLISH', ARGV[4], message)
    end
end
return {1, fence}
