package mux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// Integrity: integrityStreams concurrent streams,
// each sending integritySize bytes both ways at once (full duplex, not an
// echo), sha256 verified on both ends of every stream. integritySize is
// 4 MiB without the race detector and smaller under it (race_test.go).
const integrityStreams = 256

// duplexDigests records what each side sent: key "<stream id>/<c|s>".
type duplexDigests struct{ m sync.Map }

// sendAndVerify runs one side of a stream: it writes size pseudo-random
// bytes (seeded by the stream id and side) and half-closes, while it reads
// everything the peer sends and checks the digest the peer recorded.
func (d *duplexDigests) sendAndVerify(st *Stream, client bool, size int) error {
	me, peer := "s", "c"
	if client {
		me, peer = "c", "s"
	}
	werr := make(chan error, 1)
	go func() {
		seed := uint64(st.ID())<<1 | map[bool]uint64{true: 1, false: 0}[client]
		rng := rand.NewChaCha8([32]byte{0: byte(seed), 1: byte(seed >> 8), 2: byte(seed >> 16)})
		h := sha256.New()
		buf := make([]byte, 64<<10)
		for sent := 0; sent < size; {
			k := min(len(buf), size-sent)
			_, _ = rng.Read(buf[:k])
			h.Write(buf[:k])
			if _, err := st.Write(buf[:k]); err != nil {
				werr <- fmt.Errorf("stream %d %s write: %w", st.ID(), me, err)
				return
			}
			sent += k
		}
		d.m.Store(strconv.Itoa(int(st.ID()))+"/"+me, h.Sum(nil))
		werr <- st.CloseWrite()
	}()
	h := sha256.New()
	n, err := io.Copy(h, st)
	if err != nil {
		return fmt.Errorf("stream %d %s read: %w", st.ID(), me, err)
	}
	if err := <-werr; err != nil {
		return err
	}
	want, ok := d.m.Load(strconv.Itoa(int(st.ID())) + "/" + peer)
	switch {
	case n != int64(size):
		return fmt.Errorf("stream %d %s: got %d bytes, want %d", st.ID(), me, n, size)
	case !ok || !bytes.Equal(h.Sum(nil), want.([]byte)):
		return fmt.Errorf("stream %d %s: sha256 mismatch", st.ID(), me)
	}
	return nil
}

// serveDuplex accepts streams on s and runs the server side of each,
// sending one result per stream to errs.
func (d *duplexDigests) serveDuplex(s *Session, size int, errs chan<- error) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		st, err := s.AcceptStream(context.Background())
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- d.sendAndVerify(st, false, size) // one result per stream
		}()
	}
}

// runDuplex opens integrityStreams streams on cs at once and checks every
// one of them both ways; serverErrs carries the server side's failures.
func runDuplex(t *testing.T, d *duplexDigests, cs *Session, size int, serverErrs chan error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, integrityStreams)
	for i := 0; i < integrityStreams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := cs.Open(context.Background(), nil)
			if err != nil {
				errs <- err
				return
			}
			if err := d.sendAndVerify(st, true, size); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	require.NoError(t, errors.Join(all...))
	for i := 0; i < integrityStreams; i++ {
		all = append(all, <-serverErrs) // one result per stream from the server side
	}
	require.NoError(t, errors.Join(all...))
	require.NoError(t, cs.Close())
	t.Logf("%d streams x %d KiB both ways in %v", integrityStreams, size>>10, time.Since(start))
}

// integrityConfig gives each side credit for all streams at once.
func integrityConfig() *Config {
	return &Config{MaxStreams: integrityStreams, AcceptBacklog: integrityStreams}
}

func TestIntegrityTCP(t *testing.T) {
	var d duplexDigests
	serverErrs := make(chan error, integrityStreams)
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := Upgrade(w, r, integrityConfig())
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			d.serveDuplex(s, integritySize, serverErrs)
		}()
	}))
	defer func() {
		srv.Close()
		wg.Wait()
	}()
	cs, err := Dial(context.Background(), wsURL(srv), integrityConfig())
	require.NoError(t, err)
	defer cs.Close()
	runDuplex(t, &d, cs, integritySize, serverErrs)
}

func TestIntegrityPipe(t *testing.T) {
	var d duplexDigests
	cs, ss := pipePair(t, integrityConfig(), integrityConfig())
	serverErrs := make(chan error, integrityStreams)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.serveDuplex(ss, integritySize, serverErrs)
	}()
	runDuplex(t, &d, cs, integritySize, serverErrs)
	require.NoError(t, ss.Close())
	<-done
}
