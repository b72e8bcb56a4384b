-- Lets go of the fair lock, or of a place in its line: when the lock is
-- the token's, it goes straight to the first waiter whose place is
-- alive, whom the message names (by the digest of its token) with its
-- fence; with nobody waiting it is deleted. A token that only waits
-- leaves the line.
-- The next owner's first lease is what was left of its place, the lease
-- it trusts already (its first renewal, due when the place's would have
-- been, sets its own ttl). The message also names (`;n=`, digests in
-- order) up to eight live waiters behind it, so that the new owner's
-- process can hand the lock on itself when the next one waits there;
-- waiters whose place ran out leave the line on the way.
-- KEYS[1] lock, KEYS[2] line; ARGV[1] owner token, ARGV[2] its fence (0
-- when unknown), ARGV[3] release channel, ARGV[4] the publish command
-- (`PUBLISH`, or `SPUBLISH` on a cluster), ARGV[5..] the tokens of the
-- waiters that took the lock in process since a release here last handed
-- it over (their places leave the line first: they wait no more).
-- Returns 1 when the lock was the token's, 0 otherwise.
local token = ARGV[1]
redis.call('ZREM', KEYS[2], token .. '<', token)
for i = 5, #ARGV do
    redis.call('ZREM', KEYS[2], ARGV[i] .. '<', ARGV[i])
end
if redis.call('GET', KEYS[1]) ~= token then
    return 0
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local first, deadline
while true do
    local arrival = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(0', 'LIMIT', 0, 1)[1]
    if not arrival then
        break
    end
    local waiter = string.sub(arrival, 1, -2)
    deadline = tonumber(redis.call('ZSCORE', KEYS[2], waiter))
    redis.call('ZREM', KEYS[2], arrival, waiter)
    if deadline and deadline > now then
        first = waiter
        break
    end
end
if not first then
    redis.call('DEL', KEYS[1])
    return 1
end
redis.call('SET', KEYS[1], first, 'PX', deadline - now)
local fence = tonumber(time[1] .. string.format('%06d', time[2]))
if fence <= tonumber(ARGV[2]) then
    fence = tonumber(ARGV[2]) + 1
end
local behind = {}
local arrivals = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(0', 'LIMIT', 0, 16)
for _, arrival in ipairs(arrivals) do
    local waiter = string.sub(arrival, 1, -2)
    local place = tonumber(redis.call('ZSCORE', KEYS[2], waiter))
    if place and place > now then
        behind[#behind + 1] = redis.sha1hex(waiter)
        if #behind == 8 then
            break
        end
    else
        redis.call('ZREM', KEYS[2], arrival, waiter)
    end
end
local message = time[1] .. string.format('%06d', time[2]) .. ';g=' .. redis.sha1hex(first)
    .. ':' .. string.format('%.0f', fence)
if #behind > 0 then
    message = message .. ';n=' .. table.concat(behind, ',')
end
if ARGV[4] == 'PUBLISH' then
    redis.call('PUBLISH', ARGV[3], message)
elseif not pcall(redis.call, ARGV[4], ARGV[3], message) then
    redis.call('PUBLISH', ARGV[3], message)
end
return 1
