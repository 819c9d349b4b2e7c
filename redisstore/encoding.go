package redisstore

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"

	"github.com/steadfast-go/retry/idempotency"
)

// A key's value is one Redis string, so that a claim is a single SET with
// its lease as PX, and a completion a single SET with its retention. This
// layout is the one every version of the store has written, so processes
// of different versions can share keys during a rolling upgrade:
//
//	claimed:   'c' token fingerprintLen ':' fingerprint
//	completed: 'd'|'p' completionID fingerprintLen ':' fingerprint value error
//
// 'd' is a success and 'p' a permanent failure. value is "-" for a nil
// Record.Value or valueLen ':' bytes; error, the rest, is Record.Error.
// completionID, random like a token and as long, identifies the Complete
// call, so that the same call re-sent by the client after a lost reply is
// told from a second Complete. Lengths are decimal. The scripts compare
// whole values and take none apart: a claim's Token is its whole value.
const (
	stateClaimed   = "c"
	stateSucceeded = "d"
	statePermanent = "p"
)

// tokenLen is the length of a claim's random token (and a completion's
// id): 128 random bits in base32, as crypto/rand.Text makes them.
const tokenLen = 26

// headLen is the length of a value's state byte and token or id.
const headLen = 1 + tokenLen

// errUnreadable reports a value this store did not write, such as a key
// of the application's own under the store's prefix.
var errUnreadable = errors.New("redisstore: the key holds a value this store cannot read; is the prefix shared with other data?")

// keyed builds, in one allocation, a Redis key and the value a command
// writes to it, handed out as two strings that share it.
type keyed struct {
	b      strings.Builder
	keyLen int
}

// start writes prefix and key, with room for a value of valueLen after.
func (k *keyed) start(prefix, key string, valueLen int) {
	k.keyLen = len(prefix) + len(key)
	k.b.Grow(k.keyLen + valueLen)
	k.b.WriteString(prefix)
	k.b.WriteString(key)
}

// head writes state and a fresh random token after it.
func (k *keyed) head(state byte) {
	var t [tokenLen]byte
	_, _ = rand.Read(t[:]) // never fails; see its doc
	for i, r := range t {
		t[i] = base32[r%32]
	}
	k.b.WriteByte(state)
	k.b.Write(t[:])
}

// writeLen writes n and a colon, without the allocation of strconv.Itoa
// for n of 100 or more.
func (k *keyed) writeLen(n int) {
	var digits [20]byte
	k.b.Write(strconv.AppendInt(digits[:0], int64(n), 10))
	k.b.WriteByte(':')
}

// strings returns the key and the value.
func (k *keyed) strings() (key, value string) {
	s := k.b.String()
	return s[:k.keyLen], s[k.keyLen:]
}

// base32 is crypto/rand.Text's alphabet.
const base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// claimKey returns the Redis key of key and the value of that key claimed
// for fingerprint under a fresh token: 'c' token fingerprintLen ':'
// fingerprint. The value is also the claim's Token.
func claimKey(prefix, key, fingerprint string) (redisKey, value string) {
	var k keyed
	k.start(prefix, key, headLen+20+1+len(fingerprint))
	k.head(stateClaimed[0])
	k.writeLen(len(fingerprint))
	k.b.WriteString(fingerprint)
	return k.strings()
}

// completeKey returns the Redis key of key and the value that completes
// the claimed value token with rec, under a fresh completion id; ok is
// false when token is not a claimed value, which this store never hands
// out.
func completeKey(prefix, key, token string, rec idempotency.StoredOutcome) (redisKey, value string, ok bool) {
	if len(token) < headLen || token[:1] != stateClaimed {
		return "", "", false
	}
	fingerprint := token[headLen:] // as fingerprintLen ':' fingerprint
	var k keyed
	k.start(prefix, key, headLen+len(fingerprint)+20+1+len(rec.Value)+len(rec.Error))
	state := stateSucceeded
	if rec.Permanent {
		state = statePermanent
	}
	k.head(state[0])
	k.b.WriteString(fingerprint)
	if rec.Value == nil {
		k.b.WriteByte('-')
	} else {
		k.writeLen(len(rec.Value))
		k.b.Write(rec.Value)
	}
	k.b.WriteString(rec.Error)
	redisKey, value = k.strings()
	return redisKey, value, true
}

// decoded is a key's value taken apart. Its byte slices share the value's
// memory, capped so that appending to one cannot overwrite the rest.
type decoded struct {
	state       string
	token       []byte // the completion id for a completed value
	fingerprint []byte
	record      idempotency.StoredOutcome // completed values only
}

func decode(v []byte) (decoded, error) {
	if len(v) < headLen {
		return decoded{}, errUnreadable
	}
	d := decoded{token: v[1:headLen:headLen]}
	switch v[0] {
	case stateClaimed[0]:
		d.state = stateClaimed
	case stateSucceeded[0]:
		d.state = stateSucceeded
	case statePermanent[0]:
		d.state = statePermanent
	default:
		return decoded{}, errUnreadable
	}
	fp, rest, ok := cutLen(v[headLen:])
	if !ok {
		return decoded{}, errUnreadable
	}
	d.fingerprint = fp
	if d.state == stateClaimed {
		if len(rest) != 0 {
			return decoded{}, errUnreadable
		}
		return d, nil
	}
	d.record.Permanent = d.state == statePermanent
	if len(rest) > 0 && rest[0] == '-' {
		rest = rest[1:]
	} else {
		value, after, ok := cutLen(rest)
		if !ok {
			return decoded{}, errUnreadable
		}
		d.record.Value = value
		rest = after
	}
	if len(rest) > 0 {
		d.record.Error = string(rest)
	}
	return d, nil
}

// cutLen reads "n:" followed by n bytes from s.
func cutLen(s []byte) (field, rest []byte, ok bool) {
	digits, after, found := bytes.Cut(s, []byte(":"))
	n, ok := parseLen(digits)
	if !found || !ok || n > len(after) {
		return nil, nil, false
	}
	return after[:n:n], after[n:], true
}

// parseLen reads a length: decimal digits without leading zeros.
func parseLen(digits []byte) (n int, ok bool) {
	if len(digits) == 0 || len(digits) > 18 || digits[0] == '0' && len(digits) > 1 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// readBulk reads the raw RESP reply to SET ... GET: null when the key was
// free (RESP2 or RESP3), else the bulk string, the value the key held. ok
// is false for any other reply, such as an error.
func readBulk(raw []byte) (value []byte, null, ok bool) {
	if string(raw) == "$-1\r\n" || string(raw) == "_\r\n" {
		return nil, true, true
	}
	header, rest, found := bytes.Cut(raw, []byte("\r\n"))
	if !found || len(header) == 0 || header[0] != '$' {
		return nil, false, false
	}
	n, ok := parseLen(header[1:])
	if !ok || len(rest) != n+2 || string(rest[n:]) != "\r\n" {
		return nil, false, false
	}
	return rest[:n:n], false, true
}
