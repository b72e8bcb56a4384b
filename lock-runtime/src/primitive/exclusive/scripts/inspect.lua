local held = redis.call('GET', KEYS[1])
if not held then
    return {'', -2}
end
return {held, redis.call('PTTL', KEYS[1])}
