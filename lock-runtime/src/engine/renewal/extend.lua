-- Renews a batch of leases in one command (the watchdog's round).
--
-- Each entry is one lease, of a kind: `KEYS[i]` its key; `ARGV[3i-2]`
-- its kind, `ARGV[3i-1]` its owner token, `ARGV[3i]` its ttl in ms.
--   `k`: the key holds the token (marked with `~` or not), its expiry is
--        the lease.
-- Returns one 1 (renewed) or 0 (no longer ours) per entry, in order; an
-- entry of a kind this script does not know is an error.
local renewed = {}
for i, key in ipairs(KEYS) do
    local kind, token, ttl = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
    if kind ~= 'k' then
        return redis.error_reply('a lease of unknown kind ' .. tostring(kind))
    end
    local held = redis.call('GET', key)
    if held == token or held == token .. '~' then
        redis.call('PEXPIRE', key, ttl)
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
