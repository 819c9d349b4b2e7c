package overload_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/steadfast-go/retry/overload"
)

func TestCriticalityOf(t *testing.T) {
	ctx := context.Background()
	assert.Equal(t, overload.DefaultCriticality, overload.CriticalityOf(ctx))
	assert.Equal(t, overload.Critical, overload.CriticalityOf(overload.WithCriticality(ctx, overload.Critical)))
	assert.Equal(t, overload.Sheddable, overload.CriticalityOf(overload.WithCriticality(ctx, overload.Sheddable)))
}
