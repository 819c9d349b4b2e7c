package retrygobreaker

import (
	"errors"
	"testing"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/overload"
)

// refusingBreaker is a two-step breaker that refuses with err.
type refusingBreaker struct {
	name string
	err  error
}

func (f refusingBreaker) Allow() (func(error), error) { return nil, f.err }
func (f refusingBreaker) Name() string                { return f.name }
func (f refusingBreaker) State() gobreaker.State      { return gobreaker.StateOpen }

// TestRefusalText: the text names the breaker and its state, quoting the
// name, and refusals with an error gobreaker v2.4.0 does not have still
// match overload.ErrCircuitOpen.
func TestRefusalText(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"payments", gobreaker.ErrOpenState, `circuit open: breaker "payments" is open`},
		{"", gobreaker.ErrOpenState, `circuit open: the breaker is open`},
		{"a\nb", gobreaker.ErrTooManyRequests, `circuit open: breaker "a\nb" is half-open: too many requests`},
		{"payments", errors.New("a new refusal"), `circuit open: breaker "payments" refused the attempt: a new refusal`},
	} {
		done, err := newBreaker(refusingBreaker{c.name, c.err}).Allow()
		assert.Nil(t, done)
		require.Error(t, err)
		assert.Equal(t, c.want, err.Error())
		assert.ErrorIs(t, err, overload.ErrCircuitOpen)
		assert.ErrorIs(t, err, c.err)
	}
}
