package mux

import (
	"context"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// Sessions started with equal Configs share one defaulted copy (an idle
// server session does not hold a Config of its own); a Config that differs
// in any field, or a Config changed between two sessions, gets its own.
func TestSessionsShareConfig(t *testing.T) {
	handler := func(*Stream) error { return nil }
	cfg := &Config{KeepAliveInterval: time.Minute, KeepAliveTimeout: 3 * time.Minute, Handler: handler}
	same := *cfg
	_, s1 := tcpPair(t, nil, cfg)
	_, s2 := tcpPair(t, nil, &same)
	require.Same(t, s1.cfg, s2.cfg, "equal Configs: one copy")
	require.Equal(t, time.Minute, s1.cfg.KeepAliveInterval)
	require.Equal(t, defaultMaxBatch, s1.cfg.MaxBatch, "defaults applied")

	other := *cfg
	other.Handler = func(*Stream) error { return nil }
	_, s3 := tcpPair(t, nil, &other)
	require.NotSame(t, s1.cfg, s3.cfg, "another Handler: another copy")

	cfg.KeepAliveInterval = 2 * time.Minute
	_, s4 := tcpPair(t, nil, cfg)
	require.NotSame(t, s1.cfg, s4.cfg)
	require.Equal(t, 2*time.Minute, s4.cfg.KeepAliveInterval, "the change is seen")
	require.Equal(t, time.Minute, s1.cfg.KeepAliveInterval, "the earlier session's copy is unchanged")

	c1, _ := tcpPair(t, nil, nil)
	c2, _ := tcpPair(t, nil, nil)
	require.Same(t, c1.cfg, c2.cfg, "nil Configs share the defaults")
}

// The channels only some sessions use are made when first needed: a
// session nobody waits on holds none of them, and each still works when
// made late (after its event came).
func TestSessionLazyChannels(t *testing.T) {
	cs, ss := tcpPair(t, nil, nil)
	ss.mu.Lock()
	require.Nil(t, ss.acceptCh)
	require.Nil(t, ss.creditCh)
	require.Nil(t, ss.goawayCh)
	ss.mu.Unlock()

	st, err := cs.OpenEarly(nil)
	require.NoError(t, err)
	_, err = st.Write([]byte("x"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	peer, err := ss.AcceptStream(ctx) // may find the stream queued already
	require.NoError(t, err)
	require.NotNil(t, peer)

	require.NoError(t, cs.GoAway(0))
	<-ss.GoAwayReceived() // made before or after the GOAWAY came: closed either way
	<-ss.GoAwayReceived()
}
