package loopback

import (
	"io"
	"net"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

func TestPair(t *testing.T) {
	c, s, err := Pair()
	require.NoError(t, err)
	defer c.Close()
	defer s.Close()
	require.IsType(t, &net.TCPConn{}, c)
	require.Equal(t, c.LocalAddr().String(), s.RemoteAddr().String(), "the two ends of one connection")
	go func() {
		_, _ = c.Write([]byte("ping"))
		_ = c.Close()
	}()
	got, err := io.ReadAll(s)
	require.NoError(t, err)
	require.Equal(t, "ping", string(got))
}
