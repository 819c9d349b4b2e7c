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

// earlierClaim and earlierCompleted are the values that the store wrote
// when every operation was a Lua script (up to commit d7d9a52), with that
// version's code, frozen here: the store must keep writing and reading
// them, so that old and new processes can share keys during a rolling
// upgrade (upgrade_test.go runs that version's scripts beside this store).
func earlierClaim(token, fingerprint string) string {
	return stateClaimed + token + strconv.Itoa(len(fingerprint)) + ":" + fingerprint
}

func earlierCompleted(claimed, id string, rec idempotency.StoredOutcome) string {
	state, suffix := stateSucceeded, "-"
	if rec.Permanent {
		state = statePermanent
	}
	if rec.Value != nil {
		suffix = strconv.Itoa(len(rec.Value)) + ":" + string(rec.Value)
	}
	return state + id + claimed[1+tokenLen:] + suffix + rec.Error
}

func TestTokenIsAsLongAsRandText(t *testing.T) {
	require.Len(t, rand.Text(), tokenLen)
	_, v := claimKey("", "k", "fp")
	assert.Regexp(t, "^c["+base32+"]{26}2:fp$", v)
}

var testFingerprints = []string{"", "fp", "12:x", strings.Repeat("\xff", 300)}

var testRecords = []idempotency.StoredOutcome{
	{}, {Value: []byte{}}, {Value: []byte("-")}, {Value: []byte("5:abc")},
	{Permanent: true, Error: "boom"}, {Permanent: true, Value: []byte("1:"), Error: "-"},
}

func TestValuesAreTheOnesTheEarlierStoreWrote(t *testing.T) {
	for _, f := range testFingerprints {
		key, claimed := claimKey("p:", "k", f)
		assert.Equal(t, "p:k", key)
		require.Equal(t, earlierClaim(claimed[1:headLen], f), claimed)

		for _, rec := range testRecords {
			key, done, ok := completeKey("p:", "k", claimed, rec)
			require.True(t, ok)
			assert.Equal(t, "p:k", key)
			assert.Equal(t, earlierCompleted(claimed, done[1:headLen], rec), done)
			assert.NotEqual(t, claimed[1:headLen], done[1:headLen], "a completion id of its own")
		}
	}
}

func TestCompleteKeyRefusesWhatIsNotAClaim(t *testing.T) {
	_, done, ok := completeKey("", "k", earlierClaim(rand.Text(), "fp"), idempotency.StoredOutcome{})
	require.True(t, ok)
	for _, token := range []string{"", "token", "c" + strings.Repeat("A", tokenLen-1), done} {
		_, _, ok := completeKey("", "k", token, idempotency.StoredOutcome{})
		assert.False(t, ok, "%q", token)
	}
}

func TestEncodingRoundTrips(t *testing.T) {
	for _, f := range testFingerprints {
		_, claimed := claimKey("", "k", f)
		c, err := decode([]byte(claimed))
		require.NoError(t, err)
		assert.Equal(t, decoded{state: stateClaimed, token: []byte(claimed[1:headLen]), fingerprint: []byte(f)}, c)

		for _, rec := range testRecords {
			_, done, _ := completeKey("", "k", claimed, rec)
			d, err := decode([]byte(done))
			require.NoError(t, err)
			state := stateSucceeded
			if rec.Permanent {
				state = statePermanent
			}
			assert.Equal(t, decoded{state: state, token: []byte(done[1:headLen]), fingerprint: []byte(f), record: rec}, d)
		}
	}
}

// The outcome's value shares the reply's memory, and appending to it
// leaves the rest of the reply, as another caller could read it, alone.
func TestDecodedValueIsCapped(t *testing.T) {
	_, claimed := claimKey("", "k", "fp")
	_, done, _ := completeKey("", "k", claimed, idempotency.StoredOutcome{Permanent: true, Value: []byte("v"), Error: "e"})
	raw := []byte(done)
	d, err := decode(raw)
	require.NoError(t, err)
	_ = append(d.record.Value, 'x')
	_ = append(d.fingerprint, 'x')
	assert.Equal(t, done, string(raw))
}

func TestReadBulk(t *testing.T) {
	for _, null := range []string{"$-1\r\n", "_\r\n"} {
		v, isNull, ok := readBulk([]byte(null))
		assert.True(t, ok && isNull, null)
		assert.Nil(t, v)
	}
	v, isNull, ok := readBulk([]byte("$3\r\nabc\r\n"))
	assert.True(t, ok)
	assert.False(t, isNull)
	assert.Equal(t, "abc", string(v))
	v, _, ok = readBulk([]byte("$0\r\n\r\n"))
	assert.True(t, ok)
	assert.Empty(t, v)
	for _, other := range []string{
		"", "-MOVED 3999 127.0.0.1:6381\r\n", "-ERR syntax error\r\n", "+OK\r\n", ":1\r\n",
		"$3\r\nab\r\n", "$3\r\nabcd\r\n", "$3\r\nabc", "$03\r\nabc\r\n", "$x\r\n", "$\r\n\r\n",
	} {
		_, _, ok := readBulk([]byte(other))
		assert.False(t, ok, "%q", other)
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
		_, err := decode([]byte(v))
		assert.ErrorIs(t, err, errUnreadable, "%q", v)
	}
}

func FuzzDecode(f *testing.F) {
	token := rand.Text()
	f.Add(earlierClaim(token, "fp"))
	f.Add(earlierCompleted(earlierClaim(token, "fp"), rand.Text(), idempotency.StoredOutcome{Value: []byte("v")}))
	f.Add(earlierCompleted(earlierClaim(token, ""), rand.Text(), idempotency.StoredOutcome{Permanent: true, Error: "e"}))
	f.Fuzz(func(t *testing.T, v string) {
		d, err := decode([]byte(v))
		if err != nil {
			return
		}
		// Whatever decodes must encode back to the same bytes.
		again := earlierClaim(string(d.token), string(d.fingerprint))
		if d.state != stateClaimed {
			again = earlierCompleted(again, string(d.token), d.record)
		}
		if again != v {
			t.Fatalf("decode(%q) = %+v, which encodes as %q", v, d, again)
		}
	})
}

// A claimed or completed value is built with its key in one allocation,
// whatever the lengths.
func TestKeyAndValueInOneAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	fp := strings.Repeat("f", 64)
	_, claimed := claimKey("p:", "k", fp)
	rec := idempotency.StoredOutcome{Value: []byte(strings.Repeat("v", 300)), Error: "e"}
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { claimKey("p:", "k", fp) }))
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { completeKey("p:", "k", claimed, rec) }))
}
