-- Deletes each lock key of `KEYS` (all in one hash slot) that the caller
-- still owns, and announces each release that someone marked, on that
-- key's own channel, as the exclusive lock's release does.
--
-- `ARGV[1]` owner token, `ARGV[2]` the publish command (`PUBLISH`, or
-- `SPUBLISH` on a cluster), `ARGV[2 + i]` the release channel of
-- `KEYS[i]`. Returns 1 when any key was the caller's, else 0.
local token = ARGV[1]
local released = 0
for i, key in ipairs(KEYS) do
    local held = redis.call('GET', key)
    if held == token then
        redis.call('DEL', key)
        released = 1
    elseif held == token .. '~' then
        redis.call('DEL', key)
        released = 1
        local now = redis.call('TIME')
        local at = now[1] .. string.format('%06d', now[2])
        local channel = ARGV[2 + i]
        if ARGV[2] == 'PUBLISH' then
            redis.call('PUBLISH', channel, at)
        elseif not pcall(redis.call, ARGV[2], channel, at) then
            redis.call('PUBLISH', channel, at)
        end
    end
end
return released
