redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '1')
return 1
