package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// idle's usage errors exit 2 with a message naming the flag, before
// any session or second process starts; `bench --idle-sessions` is listed
// as its other spelling.
func TestBenchIdleUsage(t *testing.T) {
	for _, args := range [][]string{
		{"idle", "--sessions", "0"},
		{"idle", "--sessions", "5", "--active", "6"},
		{"idle", "--sessions", "5", "--duration", "0s"},
		{"idle", "--sessions", "5", "--driver", "threads"},
	} {
		code, _, errOut := invoke(nil, nil, args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.True(t, strings.Contains(errOut, "--"), "%v: %s", args, errOut)
	}
	code, out, _ := invoke(nil, nil, "bench", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "--idle-sessions")
}
