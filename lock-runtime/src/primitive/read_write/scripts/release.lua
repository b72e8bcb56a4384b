-- Lets go of what the token holds: its read (`r`), its write (`w`),
-- whatever it may hold (`?`: the clean-up of a try, a waiting writer's
-- intent, a waiting reader's place), or only its place (`p`: on a Redlock
-- master that kept it while the others granted); then tells the waiters that can
-- proceed now. With writers waiting (a live intent), the last reader out
-- wakes one writer per listening process; with none, a writer's release
-- or a writer giving up wakes every waiting reader at once. A writer's
-- release while readers wait and writers too opens the readers' turn: no
-- writer is granted until every reader that waited got in (or the turn's
-- lease ran out), so that a stream of writers cannot starve them.
-- KEYS[1] writer, KEYS[2] readers, KEYS[3] intents, KEYS[4] waiting
-- readers, KEYS[5] the readers' turn; ARGV[1] owner token, ARGV[2] what
-- it holds (`r`, `w`, `?` or `p`), ARGV[3] the readers' channel, ARGV[4] the
-- writers' channel, ARGV[5] the publish command (`PUBLISH`, or `SPUBLISH`
-- on a cluster), ARGV[6] the turn's lease in ms.
-- Returns 1 when the token held the write or a live read, 0 otherwise.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local token, what = ARGV[1], ARGV[2]

local released = 0
local wrote, intended = false, false
if (what == 'w' or what == '?') and redis.call('GET', KEYS[1]) == token then
    redis.call('DEL', KEYS[1])
    released = 1
    wrote = true
end
if what == 'r' or what == '?' then
    local deadline = tonumber(redis.call('ZSCORE', KEYS[2], token))
    if deadline then
        redis.call('ZREM', KEYS[2], token)
        if deadline > now then
            released = 1
        end
    end
end
if what == '?' or what == 'p' then
    intended = redis.call('ZREM', KEYS[3], token) == 1
    if redis.call('ZREM', KEYS[4], token) == 1 then
        -- A reader that stops waiting may end the readers' turn.
        redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
        if redis.call('EXISTS', KEYS[4]) == 0 and redis.call('DEL', KEYS[5]) == 1 then
            intended = true
        end
    end
end
if released == 0 and not intended then
    return 0
end

local function publish(channel, message)
    if ARGV[5] == 'PUBLISH' then
        redis.call('PUBLISH', channel, message)
    elseif not pcall(redis.call, ARGV[5], channel, message) then
        redis.call('PUBLISH', channel, message)
    end
end

local at = time[1] .. string.format('%06d', time[2])
-- Named by the token's digest: on Redlock every master tells it, and a
-- waiter wakes once, when enough masters told it.
local by = ';by=' .. redis.sha1hex(token)
local writers_wait = redis.call('EXISTS', KEYS[3]) == 1
if wrote and writers_wait and redis.call('EXISTS', KEYS[4]) == 1 then
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
    if redis.call('EXISTS', KEYS[4]) == 1 then
        redis.call('SET', KEYS[5], '1', 'PX', ARGV[6])
        publish(ARGV[3], at .. ';all' .. by)
        return released
    end
end
if writers_wait and redis.call('EXISTS', KEYS[5]) == 0 then
    -- Writers wait: the next may take it once no writer and no live
    -- reader is left.
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
    if redis.call('EXISTS', KEYS[3]) == 1 and redis.call('EXISTS', KEYS[1]) == 0 then
        redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
        if redis.call('EXISTS', KEYS[2]) == 0 then
            publish(ARGV[4], at .. ';1' .. by)
        end
        return released
    end
end
-- (A writer that let go leaves no writer behind; one that gave up may.)
if wrote or (intended and redis.call('EXISTS', KEYS[1]) == 0) then
    -- Nobody waits to write: every waiting reader may read.
    publish(ARGV[3], at .. ';all' .. by)
end
return released
