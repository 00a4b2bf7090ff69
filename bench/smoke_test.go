package bench

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// smokeBytes is what each stream moves each way in TestSmoke.
const smokeBytes = 256 << 10

// TestSmoke checks every registered transport: two streams, each moving
// smokeBytes client to server and back (sha256-checked), half-closes both
// ways, full closes, and no goroutine left behind.
func TestSmoke(t *testing.T) {
	for _, tr := range All() {
		t.Run(tr.Name, func(t *testing.T) {
			smoke(t, tr, Net{})
			goleak.VerifyNone(t, leakOptions()...)
		})
	}
}

// TestSmokeTLS is TestSmoke over TLS: every transport must run its
// handshake with the bench's configuration (counted by its VerifyConnection)
// and negotiate the one suite.
func TestSmokeTLS(t *testing.T) {
	for _, tr := range All() {
		t.Run(tr.Name, func(t *testing.T) {
			before := tlsHandshakes.Load()
			smoke(t, tr, Net{TLS: true})
			if tlsHandshakes.Load() == before {
				t.Fatal("no TLS handshake with the bench's client configuration")
			}
			if got := tls.CipherSuiteName(uint16(tlsSuite.Load())); got != wantTLSSuite {
				t.Errorf("suite %s, want %s", got, wantTLSSuite)
			}
			goleak.VerifyNone(t, leakOptions()...)
		})
	}
}

// wantTLSSuite is what TLS 1.3 between two Go ends picks with AES hardware.
const wantTLSSuite = "TLS_AES_128_GCM_SHA256"

// TestSmokeLink is TestSmoke through the link emulator (1 ms each way, a cap
// of 1 Gbit/s), with TLS on top: the relays must pass data and half-closes
// and end with the Pair.
func TestSmokeLink(t *testing.T) {
	link := &LinkConfig{Delay: time.Millisecond, Rate: 125e6}
	for _, tr := range All() {
		t.Run(tr.Name, func(t *testing.T) {
			smoke(t, tr, Net{TLS: true, Link: link})
			goleak.VerifyNone(t, leakOptions()...)
		})
	}
}

// leakOptions ignores the process-wide goroutines of libraries (not of a
// connection).
func leakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	}
}

func smoke(t *testing.T, tr Transport, n Net) {
	client, server, cleanup := tr.Pair(t, n)
	defer cleanup()

	type side struct {
		sum [32]byte
		err error
	}
	// The server side of each stream: read to EOF, then answer with the
	// stream's own data and half-close.
	serve := func(s Stream, reply []byte, got chan<- side) {
		h := sha256.New()
		n, err := io.Copy(h, s)
		if err == nil && n != smokeBytes {
			err = io.ErrUnexpectedEOF
		}
		if err == nil {
			_, err = s.Write(reply)
		}
		if err == nil {
			err = s.CloseWrite()
		}
		var r side
		copy(r.sum[:], h.Sum(nil))
		r.err = err
		got <- r
	}

	const streams = 2
	results := make(chan side, streams)
	accepted := make(chan error, 1)
	replies := make([][]byte, streams)
	for i := range replies {
		replies[i] = bytes.Repeat([]byte{byte('a' + i)}, smokeBytes)
		copy(replies[i], payload[i*7:i*7+1024])
	}
	go func() {
		for i := range streams {
			s, err := server.Accept()
			if err != nil {
				accepted <- err
				return
			}
			go func() {
				serve(s, replies[i], results)
				s.Close()
			}()
		}
		accepted <- nil
	}()

	type clientSide struct {
		s    Stream
		sent []byte
	}
	var cs []clientSide
	for i := range streams {
		s, err := client.Open()
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		cs = append(cs, clientSide{s, payload[i*smokeBytes/2 : i*smokeBytes/2+smokeBytes]})
	}
	select {
	case err := <-accepted:
		if err != nil {
			t.Fatalf("accept: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("streams not accepted within 10 s")
	}

	// Both streams write concurrently; each then half-closes and reads the
	// reply to EOF while the server may still be writing.
	type clientResult struct {
		reply []byte
		err   error
	}
	got := make(chan clientResult, streams)
	for _, c := range cs {
		go func() {
			var err error
			for off := 0; off < len(c.sent) && err == nil; off += 16 << 10 {
				_, err = c.s.Write(c.sent[off : off+16<<10])
			}
			if err == nil {
				err = c.s.CloseWrite()
			}
			var reply []byte
			if err == nil {
				reply, err = io.ReadAll(c.s)
			}
			got <- clientResult{reply, err}
		}()
	}
	wantServer := map[[32]byte]bool{}
	for _, c := range cs {
		wantServer[sha256.Sum256(c.sent)] = true
	}
	wantClient := map[[32]byte]bool{}
	for _, r := range replies {
		wantClient[sha256.Sum256(r)] = true
	}
	timeout := time.After(15 * time.Second)
	for range streams {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatalf("server side: %v", r.err)
			}
			if !wantServer[r.sum] {
				t.Fatal("server side: data corrupted")
			}
			delete(wantServer, r.sum)
		case <-timeout:
			t.Fatal("server side not done within 15 s")
		}
	}
	for range streams {
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatalf("client side: %v", r.err)
			}
			if len(r.reply) != smokeBytes {
				t.Fatalf("client side: got %d bytes, want %d", len(r.reply), smokeBytes)
			}
			sum := sha256.Sum256(r.reply)
			if !wantClient[sum] {
				t.Fatal("client side: data corrupted")
			}
			delete(wantClient, sum)
		case <-timeout:
			t.Fatal("client side not done within 15 s")
		}
	}
	for _, c := range cs {
		if err := c.s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
}
