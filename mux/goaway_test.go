package mux

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

// TestGoAwayOnlyNoError: NO_ERROR is the only graceful GOAWAY code (spec
// 9.4). GoAway with another code is refused with ErrGoAwayCode and sends
// nothing: the session and its streams go on. (It used to send the GOAWAY
// and drain, which the peer now reads as the end of the session.)
func TestGoAwayOnlyNoError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, nil)
		acc := acceptOne(ss)
		st, err := cs.Open(context.Background(), nil)
		require.NoError(t, err)
		peer := <-acc
		for _, code := range []frame.ErrorCode{frame.InternalError, frame.IdleTimeout, 0x1000} {
			require.ErrorIs(t, ss.GoAway(code), ErrGoAwayCode)
		}
		synctest.Wait()
		select {
		case <-cs.GoAwayReceived():
			t.Fatal("a refused GoAway reached the peer")
		default:
		}
		_, err = st.Write([]byte("x"))
		require.NoError(t, err)
		b := make([]byte, 1)
		_, err = peer.Read(b)
		require.NoError(t, err)
		_, err = ss.Open(context.Background(), nil)
		require.NoError(t, err, "the session still opens streams")
	})
}
