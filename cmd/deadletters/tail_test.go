package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTailWriter(t *testing.T) {
	var w tailWriter
	assert.Empty(t, w.lastLine())
	w.Write([]byte("first\nsecond line\n\n"))
	assert.Equal(t, "second line", w.lastLine())
	w.Write([]byte(strings.Repeat("x", 1000) + "\nend\x1b[0m"))
	assert.Len(t, w.buf, tailSize, "bounded")
	assert.Equal(t, "end [0m", w.lastLine())
	w.Write([]byte(strings.Repeat("y", 300)))
	assert.Equal(t, 200, len([]rune(w.lastLine())), "cut to one line of an error")
}
