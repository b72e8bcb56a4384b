-- Takes `permits` of the semaphore's `limit` permits for an owner token,
-- all or none (see `scripts/mod.rs` for the layout of the set).
-- KEYS[1] the semaphore; ARGV[1] owner token, ARGV[2] ttl in ms,
-- ARGV[3] the limit, ARGV[4] the permits wanted.
-- Returns {1, fence, slot...} when granted (a retry after a lost reply
-- finds its own grant), {0, ms until the first lease held ends} when too
-- few permits are free, or {-1, the limit it is held under} when the
-- limit differs from the one of permits still held.
--
-- On a Redlock master (`quarantine_left` prepended, see
-- `engine/quarantine.lua`), also KEYS[2] the master's up mark, ARGV[5]
-- the restart quarantine in ms and ARGV[6] the slots to move to (`0,2`;
-- empty for a plain acquire): a token holding claims moves them to those
-- slots; when one is taken, or it holds none, it lets go of its lease
-- and is refused ({0, ...}). A grant is then
-- {1, fence, quarantine left in ms, slot...}.
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

local function refused()
    local first = redis.call('ZRANGEBYSCORE', key, '(0', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if not first[2] then
        return {0, -1}
    end
    return {0, tonumber(first[2]) - now}
end

local left, wanted = nil, {}
if KEYS[2] then
    left = quarantine_left(KEYS[2], ARGV[5])
    for slot in string.gmatch(ARGV[6] or '', '%d+') do
        wanted[#wanted + 1] = tonumber(slot)
    end
end
local function grant(slots)
    table.sort(slots)
    if left then
        return {1, fence, left, unpack(slots)}
    end
    return {1, fence, unpack(slots)}
end

table.sort(mine)
if #wanted > 0 then
    -- A move: only a token that holds claims here moves them (a move
    -- never grants afresh); one that cannot move lets go of its lease.
    local function let_go()
        for _, slot in ipairs(mine) do
            redis.call('ZREM', key, slot .. '#' .. token)
        end
        redis.call('ZREM', key, token)
        if redis.call('ZCOUNT', key, '(0', '+inf') == 0 then
            redis.call('DEL', key)
        end
        return refused()
    end
    if #mine == 0 then
        return let_go()
    end
    if table.concat(mine, ',') ~= table.concat(wanted, ',') then
        for _, slot in ipairs(mine) do
            taken[slot] = nil
        end
        for _, want in ipairs(wanted) do
            if taken[want] or want >= limit then
                return let_go()
            end
        end
        for _, slot in ipairs(mine) do
            redis.call('ZREM', key, slot .. '#' .. token)
        end
        for _, want in ipairs(wanted) do
            redis.call('ZADD', key, -(want + 1), want .. '#' .. token)
        end
        mine = wanted
    end
end
if #mine > 0 then
    redis.call('ZADD', key, now + tonumber(ARGV[2]), token)
    expire()
    return grant(mine)
end
local recorded = redis.call('ZRANGEBYSCORE', key, 0, 0)[1]
if recorded and recorded ~= '=' .. limit then
    if held > 0 then
        return {-1, tonumber(string.sub(recorded, 2))}
    end
    redis.call('ZREM', key, recorded)
end
if held + permits > limit then
    return refused()
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
return grant(slots)
