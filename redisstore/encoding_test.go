package redisstore

import (
	"crypto/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/steadfast-go/retry/idempotency"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokenLengthMatchesScripts(t *testing.T) {
	require.Len(t, rand.Text(), tokenLen)
	for _, src := range []string{holdsSrc, completeSrc} {
		assert.Contains(t, src, "#ARGV[1] ~= "+strconv.Itoa(tokenLen))
		assert.Contains(t, src, "string.sub(v, 2, "+strconv.Itoa(1+tokenLen)+")")
	}
	assert.Contains(t, completeSrc, "string.sub(v, "+strconv.Itoa(2+tokenLen)+")")
}

// completed is what completeSrc makes of a claimed value.
func completed(claimed, id string, rec idempotency.StoredOutcome) string {
	state, suffix := encodeOutcome(rec)
	return state + id + claimed[1+tokenLen:] + suffix
}

func TestEncodingRoundTrips(t *testing.T) {
	token := rand.Text()
	for _, f := range []string{"", "fp", "12:x", strings.Repeat("\xff", 300)} {
		c, err := decode(encodeClaim(token, f))
		require.NoError(t, err)
		assert.Equal(t, decoded{state: stateClaimed, token: token, fingerprint: f}, c)

		for _, rec := range []idempotency.StoredOutcome{
			{}, {Value: []byte{}}, {Value: []byte("-")}, {Value: []byte("5:abc")},
			{Permanent: true, Error: "boom"}, {Permanent: true, Value: []byte("1:"), Error: "-"},
		} {
			id := rand.Text()
			d, err := decode(completed(encodeClaim(token, f), id, rec))
			require.NoError(t, err)
			state := stateSucceeded
			if rec.Permanent {
				state = statePermanent
			}
			assert.Equal(t, decoded{state: state, token: id, fingerprint: f, record: rec}, d)
		}
	}
}

func TestDecodeRejectsForeignValues(t *testing.T) {
	token := rand.Text()
	for _, v := range []string{
		"", "c", "c" + token, "c" + token + "2:a", "c" + token + ":", "c" + token + "x:",
		"c" + token + "-1:", "c" + token + "1:ab", "x" + token + "0:",
		"d" + token + "0:", "d" + token + "0:3:ab", "d" + token + "0:+",
		"c" + token + "99999999999999999999:",
	} {
		_, err := decode(v)
		assert.ErrorIs(t, err, errUnreadable, "%q", v)
	}
}

func FuzzDecode(f *testing.F) {
	token := rand.Text()
	f.Add(encodeClaim(token, "fp"))
	f.Add(completed(encodeClaim(token, "fp"), rand.Text(), idempotency.StoredOutcome{Value: []byte("v")}))
	f.Add(completed(encodeClaim(token, ""), rand.Text(), idempotency.StoredOutcome{Permanent: true, Error: "e"}))
	f.Fuzz(func(t *testing.T, v string) {
		d, err := decode(v)
		if err != nil {
			return
		}
		// Whatever decodes must encode back to the same bytes.
		again := encodeClaim(d.token, d.fingerprint)
		if d.state != stateClaimed {
			again = completed(again, d.token, d.record)
		}
		if again != v {
			t.Fatalf("decode(%q) = %+v, which encodes as %q", v, d, again)
		}
	})
}
