package conformance

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Checks of moving data: zero-length and 32 MiB writes, 64 concurrent
// 1 MiB echoes, a slow reader not stalling the other streams, and flow
// control bounding what a never-read stream lets the sender write.

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func runZeroLengthWrite(e *Env) error {
	c, s, err := e.Open("zero")
	if err != nil {
		return err
	}
	defer c.Reset()
	if n, err := c.Write(nil); n != 0 || err != nil {
		return fmt.Errorf("Write(nil) = %d, %v", n, err)
	}
	if _, err := c.Write([]byte("z")); err != nil {
		return err
	}
	buf := make([]byte, 8)
	n, err := s.Read(buf)
	if n != 1 || err != nil || buf[0] != 'z' {
		return fmt.Errorf("first Read after a zero-length write = %d %q %v, want 1 \"z\"", n, buf[:n], err)
	}
	return nil
}

func runLargeWrite(e *Env) error {
	c, s, err := e.Open("large")
	if err != nil {
		return err
	}
	defer c.Reset()
	payload := randBytes(32 << 20)
	want := sha256.Sum256(payload)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.Close()
		}
		werr <- err
	}()
	type res struct {
		n   int64
		sum []byte
		err error
	}
	rc := make(chan res, 1)
	go func() {
		h := sha256.New()
		n, err := io.Copy(h, s)
		rc <- res{n, h.Sum(nil), err}
	}()
	if err := <-werr; err != nil {
		return fmt.Errorf("one 32 MiB Write: %w", err)
	}
	r := <-rc
	if r.err != nil || r.n != int64(len(payload)) || !bytes.Equal(r.sum, want[:]) {
		return fmt.Errorf("received %d bytes (%v), sha256 match %v", r.n, r.err, bytes.Equal(r.sum, want[:]))
	}
	return nil
}

func runConcurrent(e *Env) error {
	const streams, size = 64, 1 << 20
	var wg sync.WaitGroup
	errs := make(chan error, streams*2)
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := fmt.Sprint("bulk", i)
			c, err := e.Client.CreateStream(http.Header{"X-Conformance": {name}})
			if err != nil {
				errs <- err
				return
			}
			defer c.Reset()
			payload := randBytes(size)
			want := sha256.Sum256(payload)
			go func() {
				if _, err := c.Write(payload); err != nil {
					errs <- fmt.Errorf("%s write: %w", name, err)
				}
				_ = c.Close()
			}()
			h := sha256.New()
			n, err := io.Copy(h, c)
			if err != nil || n != size || !bytes.Equal(h.Sum(nil), want[:]) {
				errs <- fmt.Errorf("%s: echoed %d bytes (%v), sha256 match %v", name, n, err, bytes.Equal(h.Sum(nil), want[:]))
			}
		}(i)
	}
	// Server side: echo every stream.
	var swg sync.WaitGroup
	for i := 0; i < streams; i++ {
		s, err := e.AcceptOne(60 * time.Second)
		if err != nil {
			return err
		}
		swg.Add(1)
		go func() {
			defer swg.Done()
			if _, err := io.Copy(s, s); err != nil {
				errs <- fmt.Errorf("server echo: %w", err)
			}
			_ = s.Close()
		}()
	}
	wg.Wait()
	swg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	return nil
}

func runSlowReaderIsolation(e *Env) error {
	stalled, sstalled, err := e.Open("stalled")
	if err != nil {
		return err
	}
	defer stalled.Reset()
	busy, sbusy, err := e.Open("busy")
	if err != nil {
		return err
	}
	defer busy.Reset()
	// The server floods the stalled stream, which the client never reads.
	go func() {
		chunk := make([]byte, 32<<10)
		for {
			if _, err := sstalled.Write(chunk); err != nil {
				return
			}
		}
	}()
	// Meanwhile 16 MiB must move on the other stream.
	const total = 16 << 20
	go func() {
		chunk := make([]byte, 32<<10)
		for sent := 0; sent < total; sent += len(chunk) {
			if _, err := sbusy.Write(chunk); err != nil {
				return
			}
		}
		_ = sbusy.Close()
	}()
	// Progress, not speed, is the criterion (the machine may be slow and
	// loaded): the busy stream must never stall for stallLimit.
	const stallLimit = 5 * time.Second
	var got atomic.Int64
	type res struct {
		n   int64
		err error
	}
	ch := make(chan res, 1)
	go func() {
		buf := make([]byte, 32<<10)
		var n int64
		for {
			m, err := busy.Read(buf)
			n += int64(m)
			got.Store(n)
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				ch <- res{n, err}
				return
			}
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastMove := int64(-1), time.Now()
	for {
		select {
		case r := <-ch:
			if r.err != nil || r.n != total {
				return fmt.Errorf("busy stream moved %d of %d bytes (%v)", r.n, total, r.err)
			}
			return nil
		case <-tick.C:
			if n := got.Load(); n != last {
				last, lastMove = n, time.Now()
			} else if time.Since(lastMove) > stallLimit {
				return fmt.Errorf("busy stream stalled for %v at %d of %d bytes behind a never-read stream (head-of-line blocking)", stallLimit, n, total)
			}
		}
	}
}

func runFlowControlBound(e *Env) error {
	c, s, err := e.Open("unread")
	if err != nil {
		return err
	}
	defer c.Reset()
	var written atomic.Int64
	go func() {
		chunk := make([]byte, 16<<10)
		for {
			n, err := s.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	// Wait for the writer to stall.
	const bound = 32 << 20
	var last int64 = -1
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		w := written.Load()
		if w > bound {
			return fmt.Errorf("sender wrote %d MiB into a never-read stream (bound %d MiB)", w>>20, bound>>20)
		}
		if w == last {
			return nil
		}
		last = w
	}
	return fmt.Errorf("sender never stalled on a never-read stream (%d MiB written in 10 s)", written.Load()>>20)
}
