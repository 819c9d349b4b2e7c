package redisstore

import "github.com/redis/go-redis/v9"

// The scripts each touch one key (KEYS[1]), so Redis Cluster runs them on
// the key's own slot. They are sent with EVALSHA; go-redis falls back to
// EVAL when the server has not cached a script yet (NOSCRIPT), which costs
// one extra round trip, once per script and server.

// claimSrc claims a free key with SET NX PX (ARGV[1] the claimed value,
// ARGV[2] the lease in ms) and returns "", or returns the value found.
// An absent key is free: Redis drops a key when its lease or retention
// (its PX) runs out.
const claimSrc = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return '' end
return redis.call('GET', KEYS[1])
`

// holdsSrc starts renew and release: it returns 0 unless the
// key's value carries token ARGV[1], and leaves the value's state byte in s.
// 26 is tokenLen: the token is at bytes 2..27 of the value.
const holdsSrc = `
local v = redis.call('GET', KEYS[1])
if not v or #ARGV[1] ~= 26 or string.sub(v, 2, 27) ~= ARGV[1] then return 0 end
local s = string.sub(v, 1, 1)
`

// renewSrc sets the lease of a key claimed under ARGV[1] to ARGV[2] ms.
const renewSrc = holdsSrc + `
if s ~= '` + stateClaimed + `' then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`

// completeSrc turns a key claimed under token ARGV[1] into a completed
// one: state ARGV[2], outcome suffix ARGV[3], retention ARGV[4] ms, and
// ARGV[5], a random id of this Complete, where the token was. A key
// already completed under that id is this very Complete, re-sent by the
// client after a lost reply: it succeeds and changes nothing. Any other
// Complete of a completed key is refused, its token included.
const completeSrc = `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local id = string.sub(v, 2, 27)
if string.sub(v, 1, 1) ~= '` + stateClaimed + `' then
  if id == ARGV[5] then return 1 end
  return 0
end
if #ARGV[1] ~= 26 or id ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2] .. ARGV[5] .. string.sub(v, 28) .. ARGV[3], 'PX', ARGV[4])
return 1
`

// releaseSrc deletes a key still claimed under ARGV[1].
const releaseSrc = holdsSrc + `
if s == '` + stateClaimed + `' then redis.call('DEL', KEYS[1]) end
return 1
`

// scripts are a Store's own, since a redis.Script caches its hash.
type scripts struct {
	claim, renew, complete, release *redis.Script
}

func newScripts() scripts {
	return scripts{
		claim:    redis.NewScript(claimSrc),
		renew:    redis.NewScript(renewSrc),
		complete: redis.NewScript(completeSrc),
		release:  redis.NewScript(releaseSrc),
	}
}
