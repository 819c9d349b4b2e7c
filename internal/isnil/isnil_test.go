package isnil_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/steadfast-go/retry/internal/isnil"
)

type fn func()

type sink []int

func TestIs(t *testing.T) {
	var nilInt *int
	n := 1
	assert.True(t, isnil.Is(nil))
	assert.True(t, isnil.Is(nilInt))
	assert.True(t, isnil.Is(fn(nil)))
	assert.False(t, isnil.Is(&n))
	assert.False(t, isnil.Is(fn(func() {})))
	assert.False(t, isnil.Is(0))
	assert.False(t, isnil.Is(struct{}{}))
	assert.False(t, isnil.Is(sink(nil)), "a nil slice type may have working methods")
}
