package mux

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// The reference driver uses none of the fast paths, over a connection
// that would allow them all; the fast-paths driver uses all three.
func TestDriverSelectsFastPaths(t *testing.T) {
	for _, tc := range []struct {
		driver Driver
		fast   bool
	}{
		{DriverGoroutines, false},
		{DriverFastPaths, true},
	} {
		t.Run(tc.driver.String(), func(t *testing.T) {
			cfg := &Config{Driver: tc.driver}
			cs, ss := tcpPair(t, cfg, cfg)
			go echoServer(ss)
			st, err := cs.OpenEarly(nil)
			require.NoError(t, err)
			buf := make([]byte, 100)
			for range 50 {
				_, err := st.Write(buf)
				require.NoError(t, err)
				_, err = io.ReadFull(st, buf)
				require.NoError(t, err)
			}
			require.Equal(t, tc.fast, cs.leadOK)
			require.Equal(t, tc.fast, cs.directWrites)
			require.Equal(t, tc.fast, cs.e.Splicing())
			if !tc.fast {
				require.Zero(t, cs.Stats().LeaderMessages, "no Read leads")
			}
		})
	}
}

func TestDriverValidate(t *testing.T) {
	require.NoError(t, (&Config{Driver: DriverGoroutines}).Validate())
	require.ErrorContains(t, (&Config{Driver: 9}).Validate(), "unknown Driver")
	require.Equal(t, "unknown", Driver(9).String())
	require.Equal(t, DriverFastPaths, DriverFastPaths.resolve())
}
