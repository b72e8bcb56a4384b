if not redis.acl_check_cmd then
    return {}
end
local channel = ARGV[1]
local on_keys = {
    GET = {}, SET = {'v'}, DEL = {}, PEXPIRE = {'1'}, PTTL = {},
    APPEND = {'v'}, INCR = {},
    EVAL = 'script', EVALSHA = 'script',
}
local elsewhere = {
    TIME = {}, INFO = {'server'}, WAIT = {'0', '0'},
    PUBLISH = {channel, 'm'}, SPUBLISH = {channel, 'm'},
    SUBSCRIBE = {channel}, UNSUBSCRIBE = {channel},
    SSUBSCRIBE = {channel}, SUNSUBSCRIBE = {channel},
}
local function may(name, ...)
    local known, allowed = pcall(redis.acl_check_cmd, name, ...)
    return not known or allowed
end
local denied = {}
for i = 2, #ARGV do
    local name = ARGV[i]
    local ok = true
    local rest = on_keys[name]
    if rest == 'script' then
        local body = name == 'EVAL' and 'return 1' or string.rep('0', 40)
        ok = may(name, body, tostring(#KEYS), unpack(KEYS))
    elseif rest then
        for _, key in ipairs(KEYS) do
            ok = ok and may(name, key, unpack(rest))
        end
    elseif elsewhere[name] then
        ok = may(name, unpack(elsewhere[name]))
    end
    if not ok then
        denied[#denied + 1] = string.lower(name)
    end
end
return denied
