package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWrapTable(t *testing.T) {
	long := "  remedy                   " + strings.Repeat("word ", 30) + "end"
	got := wrapTable(long+"\nshort\n", 60)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	assert.Greater(t, len(lines), 3)
	for _, l := range lines {
		assert.LessOrEqual(t, len(l), 60, l)
	}
	assert.True(t, strings.HasPrefix(lines[1], strings.Repeat(" ", 27)+"word"), "continuations start under the value: %q", lines[1])
	assert.Equal(t, "short", lines[len(lines)-1])
	assert.Equal(t, strings.Fields(long+" short"), strings.Fields(got), "no word lost or split")
	path := "  file                     /a/very/long/path/" + strings.Repeat("x", 80)
	assert.Equal(t, path, wrapTable(path, 60), "a word longer than the room stays whole")
	check := "0       fabric           unsupported  " + strings.Repeat("because ", 20)
	w := strings.Split(wrapTable(check, 80), "\n")
	assert.True(t, strings.HasPrefix(w[1], strings.Repeat(" ", 38)+"because"), "%q", w[1])
}
