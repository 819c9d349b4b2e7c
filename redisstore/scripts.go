package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

// A claim is one native command (Store.Claim); renew, complete and
// release are Lua scripts, since Redis 7 has no compare-and-set. Each
// touches one key (KEYS[1]), so Redis Cluster runs it on the key's own
// slot, and compares the key's whole value with the claim's Token, which
// is the value the claim wrote: no script takes a value apart.

// renewSrc sets the lease of a key still claimed under ARGV[1] to
// ARGV[2] ms.
const renewSrc = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`

// completeSrc replaces a key still claimed under ARGV[1] by the completed
// value ARGV[2], kept ARGV[3] ms. A key that already holds ARGV[2] is this
// very Complete, re-sent by the client after a lost reply: it succeeds and
// changes nothing. ARGV[2] carries a fresh completion id, so any other
// Complete of a completed key is refused, its token's included.
const completeSrc = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
if v == ARGV[2] then return 1 end
return 0
`

// releaseSrc deletes a key still claimed under ARGV[1].
const releaseSrc = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`

// script is a Lua script and its SHA-1, the name EVALSHA runs it by.
type script struct {
	src string
	sha any // a string, boxed once
}

func newScript(src string) script {
	sum := sha1.Sum([]byte(src))
	return script{src: src, sha: hex.EncodeToString(sum[:])}
}

// scripts are the store's scripts.
type scripts struct {
	renew, complete, release script
}

func newScripts() scripts {
	return scripts{
		renew:    newScript(renewSrc),
		complete: newScript(completeSrc),
		release:  newScript(releaseSrc),
	}
}

// scriptArgs are the arguments of one script call: EVALSHA sha 1 key,
// then ARGV. The token and value go in as pointers to the fields here
// (go-redis writes a *string as its string), which saves an allocation
// each over boxing them; the key stays a string, so that cluster routing
// and tracing hooks see it as usual.
type scriptArgs struct {
	args         [7]any
	token, value string
}

// run sends sc with EVALSHA and the first n of a's args, and returns its
// integer reply. When the server has not cached sc yet (NOSCRIPT), it
// sends it again with EVAL, one round trip more, once per script and
// server.
func run(ctx context.Context, client redis.UniversalClient, sc script, a *scriptArgs, n int) (int64, error) {
	a.args[0], a.args[1], a.args[2] = "evalsha", sc.sha, 1
	args := a.args[:n]
	cmd := redis.NewIntCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	_ = client.Process(ctx, cmd)
	reply, err := cmd.Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		args[0], args[1] = "eval", sc.src
		cmd = redis.NewIntCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		_ = client.Process(ctx, cmd)
		reply, err = cmd.Result()
	}
	return reply, err
}
