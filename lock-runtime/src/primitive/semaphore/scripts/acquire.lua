-- Takes `permits` of the semaphore's `limit` permits for an owner token,
-- all or none (see `scripts/mod.rs` for the layout of the set).
-- KEYS[1] the semaphore; ARGV[1] owner token, ARGV[2] ttl in ms,
-- ARGV[3] the limit, ARGV[4] the permits wanted.
-- Returns {1, fence, slot...} when granted (a retry after a lost reply
-- finds its own grant), {0, ms until the first lease held ends} when too
-- few permits are free, or {-1, the limit it is held under} when the
-- limit differs from the one of permits still held.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local fence = tonumber(time[1] .. string.format('%06d', time[2]))
local key, token = KEYS[1], ARGV[1]
local limit, permits = tonumber(ARGV[3]), tonumber(ARGV[4])

-- Leases that ended leave first, then every claim no live lease backs:
-- a holder that died gives its permits back when its lease ends.
redis.call('ZREMRANGEBYSCORE', key, '(0', now)
local taken, held, mine = {}, 0, {}
local claims = redis.call('ZRANGEBYSCORE', key, '-inf', '(0', 'WITHSCORES')
for i = 1, #claims, 2 do
    local owner = string.match(claims[i], '^%d+#(.*)$')
    if owner and redis.call('ZSCORE', key, owner) then
        local slot = -tonumber(claims[i + 1]) - 1
        taken[slot] = true
        held = held + 1
        if owner == token then
            mine[#mine + 1] = slot
        end
    else
        redis.call('ZREM', key, claims[i])
    end
end

-- The set lives as long as its latest lease.
local function expire()
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]
    redis.call('PEXPIRE', key, tonumber(last) - now)
end

if #mine > 0 then
    redis.call('ZADD', key, now + tonumber(ARGV[2]), token)
    expire()
    table.sort(mine)
    return {1, fence, unpack(mine)}
end
local recorded = redis.call('ZRANGEBYSCORE', key, 0, 0)[1]
if recorded and recorded ~= '=' .. limit then
    if held > 0 then
        return {-1, tonumber(string.sub(recorded, 2))}
    end
    redis.call('ZREM', key, recorded)
end
if held + permits > limit then
    local first = redis.call('ZRANGEBYSCORE', key, '(0', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    return {0, tonumber(first[2]) - now}
end
local slots, slot = {}, 0
while #slots < permits and slot < limit do
    if not taken[slot] then
        slots[#slots + 1] = slot
        redis.call('ZADD', key, -(slot + 1), slot .. '#' .. token)
    end
    slot = slot + 1
end
redis.call('ZADD', key, 0, '=' .. limit)
redis.call('ZADD', key, now + tonumber(ARGV[2]), token)
expire()
return {1, fence, unpack(slots)}
