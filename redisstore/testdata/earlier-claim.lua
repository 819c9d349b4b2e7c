-- Store.Claim's script up to commit d7d9a52, kept for upgrade_test.go:
-- ARGV[1] the claimed value 'c' token fpLen ':' fp, ARGV[2] the lease in ms.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return '' end
return redis.call('GET', KEYS[1])
