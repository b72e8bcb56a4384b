-- Takes every lock key of `KEYS` (all in one hash slot) for one owner,
-- or none of them: each key as the exclusive lock's, its value the owner
-- token and its expiry the lease.
--
-- `ARGV[1]` owner token, `ARGV[2]` ttl in ms.
-- Returns `{1, fence}` when the owner holds every key now, or
-- `{0, pttl, i}` when `KEYS[i]` is someone else's: that key is marked
-- (`~`), so that its release is announced, and nothing was taken.
-- A key already the owner's (a retry after a lost reply) has its lease
-- refreshed; a key another locker's line let go of for others (`^`) is
-- free to this caller, who takes it marked, so that its release tells
-- that line.
local token, ttl = ARGV[1], ARGV[2]
local marked = token .. '~'
local values = {}
for i, key in ipairs(KEYS) do
    local held = redis.call('GET', key)
    values[i] = held
    if held and held ~= token and held ~= marked and string.sub(held, -1) ~= '^' then
        if string.sub(held, -1) ~= '~' then
            redis.call('APPEND', key, '~')
        end
        return {0, redis.call('PTTL', key), i}
    end
end
for i, key in ipairs(KEYS) do
    local held = values[i]
    if held == token or held == marked then
        redis.call('PEXPIRE', key, ttl)
    elseif held then
        redis.call('SET', key, marked, 'PX', ttl)
    else
        redis.call('SET', key, token, 'PX', ttl)
    end
end
local now = redis.call('TIME')
return {1, tonumber(now[1] .. string.format('%06d', now[2]))}
