package overload_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/steadfast-go/retry/overload"
)

func TestRefuserOf(t *testing.T) {
	for err, want := range map[error]overload.Refuser{
		nil:                              overload.NotRefused,
		errors.New("connection refused"): overload.NotRefused,
		overload.ErrBudgetExhausted:      overload.RefusedByBudget,
		fmt.Errorf("w: %w", overload.ErrCircuitOpen):                        overload.RefusedByBreaker,
		overload.ErrLimitExceeded:                                           overload.RefusedByLimit,
		errors.Join(overload.ErrLimitExceeded, overload.ErrBudgetExhausted): overload.RefusedByBudget,
		fmt.Errorf("w: %w", overload.ErrRateLimited):                        overload.RefusedByRate,
		overload.ErrPaused:                                                  overload.RefusedByPause,
	} {
		assert.Equal(t, want, overload.RefuserOf(err), "%v", err)
	}
	assert.Equal(t, []string{"", "budget", "breaker", "limit", "rate", "pause", ""},
		[]string{overload.NotRefused.String(), overload.RefusedByBudget.String(), overload.RefusedByBreaker.String(), overload.RefusedByLimit.String(),
			overload.RefusedByRate.String(), overload.RefusedByPause.String(), overload.Refuser(9).String()})
}
