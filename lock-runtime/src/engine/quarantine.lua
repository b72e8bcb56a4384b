-- Redlock's restart quarantine on one master, for the acquire scripts
-- that run there (prepended to them): a master that restarted without
-- persistence forgot the leases it held, which still run on the others,
-- so for `quarantine` ms from its start its grants are fresh and count
-- less (see each primitive's Redlock round). The answer is kept in the
-- master's up mark: `<quarantine>` once out of it, `fresh:<quarantine>`
-- (expiring with it) while in it, so the uptime is read once per start.
-- `mark` the up mark's key, `quarantine` its length in ms (a string, as
-- the script was given it).
-- Returns the ms of quarantine left, 0 when out of it.
local function quarantine_left(mark, quarantine)
    local length = tonumber(quarantine)
    local seen = redis.call('GET', mark) or ''
    local fresh_for = tonumber(string.match(seen, '^fresh:(%d+)$') or '-1')
    if fresh_for >= length then
        return math.max(redis.call('PTTL', mark), 1)
    elseif fresh_for < 0 and (tonumber(seen) or -1) >= length then
        return 0
    end
    local info = redis.call('INFO', 'server')
    local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)') or '-1')
    if up >= 0 and up * 1000 < length then
        local left = length - up * 1000
        redis.call('SET', mark, 'fresh:' .. quarantine, 'PX', left)
        return left
    end
    redis.call('SET', mark, quarantine)
    return 0
end

