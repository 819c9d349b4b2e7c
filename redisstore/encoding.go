package redisstore

import (
	"errors"
	"strconv"
	"strings"

	"github.com/steadfast-go/retry/idempotency"
)

// A key's value is one Redis string, so that a claim is a single SET with
// its lease as PX, and a completion a single SET with its retention:
//
//	claimed:   'c' token fingerprintLen ':' fingerprint
//	completed: 'd'|'p' completionID fingerprintLen ':' fingerprint value error
//
// 'd' is a success and 'p' a permanent failure. value is "-" for a nil
// Record.Value or valueLen ':' bytes; error, the rest, is Record.Error.
// completionID, random like a token and as long, identifies the Complete
// call, so that the same call re-sent by the client after a lost reply is
// told from a second Complete. Lengths are decimal. The Lua scripts rely on
// the token or id being at bytes 2..tokenLen+1.
const (
	stateClaimed   = "c"
	stateSucceeded = "d"
	statePermanent = "p"
)

// tokenLen is the length of a token: crypto/rand.Text, 128 random bits in
// base32.
const tokenLen = 26

// errUnreadable reports a value this store did not write, such as a key
// of the application's own under the store's prefix.
var errUnreadable = errors.New("redisstore: the key holds a value this store cannot read; is the prefix shared with other data?")

// encodeClaim is the value of a key claimed under token.
func encodeClaim(token, fingerprint string) string {
	var b strings.Builder
	b.Grow(1 + len(token) + 21 + len(fingerprint))
	b.WriteString(stateClaimed)
	b.WriteString(token)
	b.WriteString(strconv.Itoa(len(fingerprint)))
	b.WriteByte(':')
	b.WriteString(fingerprint)
	return b.String()
}

// encodeOutcome returns the state byte and the suffix that complete
// appends to a claimed value.
func encodeOutcome(rec idempotency.StoredOutcome) (state string, suffix string) {
	state = stateSucceeded
	if rec.Permanent {
		state = statePermanent
	}
	var b strings.Builder
	b.Grow(21 + len(rec.Value) + len(rec.Error))
	if rec.Value == nil {
		b.WriteByte('-')
	} else {
		b.WriteString(strconv.Itoa(len(rec.Value)))
		b.WriteByte(':')
		b.Write(rec.Value)
	}
	b.WriteString(rec.Error)
	return state, b.String()
}

// decoded is a key's value taken apart.
type decoded struct {
	state       string
	token       string // the completion id for a completed value
	fingerprint string
	record      idempotency.StoredOutcome // completed values only
}

func decode(v string) (decoded, error) {
	if len(v) < 1+tokenLen {
		return decoded{}, errUnreadable
	}
	d := decoded{state: v[:1], token: v[1 : 1+tokenLen]}
	rest := v[1+tokenLen:]
	fp, rest, ok := cutLen(rest)
	if !ok {
		return decoded{}, errUnreadable
	}
	d.fingerprint = fp
	switch d.state {
	case stateClaimed:
		if rest != "" {
			return decoded{}, errUnreadable
		}
		return d, nil
	case stateSucceeded, statePermanent:
	default:
		return decoded{}, errUnreadable
	}
	d.record.Permanent = d.state == statePermanent
	if strings.HasPrefix(rest, "-") {
		rest = rest[1:]
	} else {
		value, after, ok := cutLen(rest)
		if !ok {
			return decoded{}, errUnreadable
		}
		d.record.Value = []byte(value)
		rest = after
	}
	d.record.Error = rest
	return d, nil
}

// cutLen reads "n:" followed by n bytes from s.
func cutLen(s string) (field, rest string, ok bool) {
	digits, after, found := strings.Cut(s, ":")
	if !found || digits == "" || len(digits) > 19 {
		return "", "", false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || n > len(after) || strconv.Itoa(n) != digits {
		return "", "", false
	}
	return after[:n], after[n:], true
}
