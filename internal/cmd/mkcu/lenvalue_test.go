package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLenValue: the array lengths cuda.h writes, and spellings that are not one number.
func TestLenValue(t *testing.T) {
	h, err := parseCHeader([]byte("#define CU_N 64\ntypedef struct CUthing_st *CUthing;\n"))
	require.NoError(t, err)
	for s, want := range map[string]int{
		"64": 64, "CU_N": 64, "4+4": 8, "1 - 5 + 6": 2, "-1+2": 1, "52 - sizeof(CUthing *)": 44,
		"2 + sizeof ( int )": 6,
	} {
		got, err := h.lenValue(s)
		if assert.NoError(t, err, s) {
			assert.Equal(t, want, got, s)
		}
	}
	for _, s := range []string{"4 4", "CU_N 1", "4 + 4 x", "(4 + 4)", "1 - 5", "x", "4 +", "sizeof(long)"} {
		_, err := h.lenValue(s)
		assert.Error(t, err, "%q", s)
	}
}
