package mux

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

// TestSlowReaderIsolation: stream A's reader never reads while stream B
// moves many times the session window.
func TestSlowReaderIsolation(t *testing.T) {
	size := 64 << 20
	if testing.Short() || raceEnabled {
		size = 16 << 20
	}
	cs, ss := pipePair(t, nil, nil)
	a, aPeer := openPair(t, cs, ss)
	b, bPeer := openPair(t, cs, ss)
	_ = aPeer // never read

	// Fill A's window: its writer blocks once the peer's window is full.
	aDone := make(chan int)
	go func() {
		n, _ := a.Write(make([]byte, 8<<20))
		aDone <- n
	}()

	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	want := sha256.New()
	go func() {
		for sent := 0; sent < size; sent += len(data) {
			if _, err := b.Write(data); err != nil {
				return
			}
		}
		_ = b.CloseWrite()
	}()
	for sent := 0; sent < size; sent += len(data) {
		want.Write(data)
	}
	got := sha256.New()
	n, err := io.Copy(got, bPeer)
	require.NoError(t, err)
	require.Equal(t, int64(size), n)
	require.Equal(t, want.Sum(nil), got.Sum(nil))

	// A is still stuck at its window, and resetting it frees the writer.
	select {
	case <-aDone:
		t.Fatal("A's write finished although nobody reads")
	default:
	}
	require.NoError(t, a.SetWriteDeadline(time.Now()))
	require.Less(t, <-aDone, 8<<20)
}

// TestStreamCredit: the peer's MaxStreams bounds concurrent opens, and a
// slot comes back only when a stream has ended both ways and was accepted.
func TestStreamCredit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, &Config{MaxStreams: 2})
		ctx := context.Background()
		s1, p1 := openPair(t, cs, ss)
		_, _ = openPair(t, cs, ss)
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond) // fake time: fires once all else is blocked
		defer cancel()
		_, err := cs.Open(tctx, nil)
		require.ErrorIs(t, err, ErrTimeout, "third stream must wait for credit")

		// End s1 both ways: the slot comes back.
		require.NoError(t, s1.Close())
		_, err = io.ReadAll(p1)
		require.NoError(t, err)
		require.NoError(t, p1.Close())
		_, err = io.ReadAll(s1)
		require.NoError(t, err)
		acc := acceptOne(ss)
		s3, err := cs.Open(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, uint32(5), s3.ID())
		require.NotNil(t, <-acc)
	})
}

// TestAcceptBacklog: streams beyond the backlog are refused.
func TestAcceptBacklog(t *testing.T) {
	cs, ss := pipePair(t, nil, &Config{AcceptBacklog: 2})
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		_, err := cs.Open(ctx, nil)
		require.NoError(t, err)
	}
	_, err := cs.Open(ctx, nil)
	var se *StreamError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "REFUSED_STREAM", se.Code.String())
	_, err = ss.AcceptStream(ctx)
	require.NoError(t, err)
	_, err = cs.Open(ctx, nil)
	require.NoError(t, err)
}

// TestBacklogRefusalsDoNotEndSession: a client that opens within its credit
// faster than the application accepts gets REFUSED_STREAM for what the
// backlog cannot hold, and those slots back only as streams are accepted.
// Retrying, it opens every stream and its session lives: refusals it cannot
// avoid do not count as rapid resets (they once did, and ended the session
// with ENHANCE_YOUR_CALM after 200 in 10 s).
func TestBacklogRefusalsDoNotEndSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, &Config{AcceptBacklog: 1})
		ctx := context.Background()
		const openers, each = 8, 3 * maxYoungResets / 8
		acceptDone := make(chan struct{})
		go func() {
			defer close(acceptDone)
			for {
				st, err := ss.AcceptStream(ctx)
				if err != nil {
					return
				}
				_ = st.Close()
				elapse(time.Millisecond) // a slow application
			}
		}()
		var refused atomic.Int64
		var wg sync.WaitGroup
		for range openers {
			wg.Go(func() {
				for range each {
					for {
						st, err := cs.Open(ctx, nil)
						if err == nil {
							_ = st.Close()
							break
						}
						var se *StreamError
						if !errors.As(err, &se) || se.Code != frame.RefusedStream {
							t.Errorf("Open: %v", err)
							return
						}
						refused.Add(1)
					}
				}
			})
		}
		wg.Wait()
		require.NoError(t, cs.Err())
		require.NoError(t, ss.Err())
		require.Positive(t, refused.Load(), "the backlog refused some")
		t.Logf("%d streams opened, %d refusals on the way", openers*each, refused.Load())
		require.NoError(t, ss.Close())
		<-acceptDone
	})
}

func TestCloseRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, ss := pipePair(t, nil, nil)
		st, peer := openPair(t, cs, ss)
		require.NoError(t, st.CloseRead())
		_, err := st.Read(make([]byte, 1))
		require.ErrorIs(t, err, ErrStreamClosed)
		// Once STOP_SENDING has landed, the peer's Write ends with a
		// *StreamError.
		synctest.Wait()
		_, werr := peer.Write(make([]byte, 64<<10))
		var se *StreamError
		require.ErrorAs(t, werr, &se)
		require.True(t, se.Remote)
		// The other direction still works.
		_, err = st.Write([]byte("still"))
		require.NoError(t, err)
		require.NoError(t, st.Close())
		got, err := io.ReadAll(peer)
		require.NoError(t, err)
		require.Equal(t, "still", string(got))
		synctest.Wait() // the FIN exchange is done
		require.Zero(t, cs.NumStreams())
		require.Zero(t, ss.NumStreams())
	})
}

// TestCrowdedWritesCountExactly: many Writes wait for a small session send
// buffer, so their bytes are queued by the engine as room frees
// (engine.LendWrite); those whose deadline passes return exactly what was
// queued, and the peer reads exactly that, in order, after which a second
// Write's bytes follow. The others' bytes all arrive, checksummed.
func TestCrowdedWritesCountExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		small := &Config{SessionSendBuffer: 32 << 10, StreamSendBuffer: 64 << 10,
			InitialStreamWindow: 64 << 10, MaxStreamWindow: 64 << 10}
		cs, ss := pipePair(t, small, small)
		ctx := context.Background()
		const streams, size = 16, 256 << 10
		type result struct {
			n     int
			err   error
			data  []byte
			tail  []byte
			dl    bool
			recvd []byte
		}
		res := make([]result, streams)
		var wg sync.WaitGroup
		for i := range streams {
			st, err := cs.Open(ctx, nil)
			require.NoError(t, err)
			r := &res[i]
			r.data = make([]byte, size)
			r.tail = []byte("tail")
			for j := range r.data {
				r.data[j] = byte(i*7 + j*13)
			}
			r.dl = i%2 == 1
			wg.Go(func() {
				if r.dl {
					_ = st.SetWriteDeadline(time.Now().Add(time.Second))
				}
				r.n, r.err = st.Write(r.data)
				_ = st.SetWriteDeadline(time.Time{})
				if _, err := st.Write(r.tail); err != nil {
					t.Errorf("second Write: %v", err)
				}
				_ = st.CloseWrite()
			})
		}
		// The server reads nothing for two seconds: the odd streams' deadline
		// passes while their Writes wait with bytes lent.
		elapse(2 * time.Second)
		for range streams {
			st, err := ss.AcceptStream(ctx)
			require.NoError(t, err)
			wg.Go(func() {
				got, err := io.ReadAll(st)
				if err != nil {
					t.Errorf("read: %v", err)
				}
				res[st.ID()/2].recvd = got // client stream ids 1, 3, 5, ...
			})
		}
		wg.Wait()
		for i, r := range res {
			if r.dl {
				require.ErrorIs(t, r.err, ErrTimeout, "stream %d", i)
				require.Less(t, r.n, size, "stream %d", i)
			} else {
				require.NoError(t, r.err, "stream %d", i)
				require.Equal(t, size, r.n)
			}
			want := append(append([]byte(nil), r.data[:r.n]...), r.tail...)
			require.Equal(t, sha256.Sum256(want), sha256.Sum256(r.recvd), "stream %d: %d bytes written, %d read", i, r.n+len(r.tail), len(r.recvd))
		}
	})
}
