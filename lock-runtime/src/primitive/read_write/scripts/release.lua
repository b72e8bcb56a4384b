-- Lets go of whatever the token holds: the write, its read, or a waiting
-- writer's intent; then tells the waiters that can proceed now. With
-- writers waiting (a live intent), the last reader out wakes one writer
-- per listening process; with none, a writer's release or a writer giving
-- up wakes every waiting reader at once.
-- KEYS[1] writer, KEYS[2] readers, KEYS[3] intents; ARGV[1] owner token,
-- ARGV[2] the readers' channel, ARGV[3] the writers' channel, ARGV[4] the
-- publish command (`PUBLISH`, or `SPUBLISH` on a cluster).
-- Returns 1 when the token held the write or a live read, 0 otherwise.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local token = ARGV[1]

local released = 0
local wrote = redis.call('GET', KEYS[1]) == token
if wrote then
    redis.call('DEL', KEYS[1])
    released = 1
end
local deadline = tonumber(redis.call('ZSCORE', KEYS[2], token))
if deadline then
    redis.call('ZREM', KEYS[2], token)
    if deadline > now then
        released = 1
    end
end
local intended = redis.call('ZREM', KEYS[3], token) == 1
if released == 0 and not intended then
    return 0
end
if redis.call('EXISTS', KEYS[1]) == 1 then
    -- Another writer holds it: nobody can proceed yet.
    return released
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)

local function publish(channel, message)
    if ARGV[4] == 'PUBLISH' then
        redis.call('PUBLISH', channel, message)
    elseif not pcall(redis.call, ARGV[4], channel, message) then
        redis.call('PUBLISH', channel, message)
    end
end

local at = time[1] .. string.format('%06d', time[2])
if redis.call('EXISTS', KEYS[3]) == 1 then
    if redis.call('EXISTS', KEYS[2]) == 0 then
        publish(ARGV[3], at)
    end
elseif wrote or intended then
    publish(ARGV[2], at .. ';all')
end
return released
