package bench

import (
	"cmp"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"
)

// The throughput workloads: bulk data over one stream (Bulk1) and over many
// streams at once (StreamsN), in MB/s and CPU per MiB.

// Bulk1 moves data over one stream in bulkChunk writes, client to server (c2s:
// the client masks on WebSocket transports) or server to client, read
// bulkChunk bytes at a time. The clock stops when the receiver has every
// byte. Besides MB/s it reports CPUPerMiB.
func Bulk1(b *testing.B, tr Transport, c2s bool) {
	BulkWith(b, tr, BulkOptions{C2S: c2s})
}

// BulkOptions vary Bulk1.
type BulkOptions struct {
	C2S bool // client to server, else server to client
	// ReadSize is the receiver's buffer; 0 means bulkChunk (32 KiB).
	ReadSize int
	// Copy has the receiver io.Copy the stream into io.Discard until
	// io.EOF (the writer half-closes after the last chunk): the stream's
	// io.WriterTo where it has one, else io.Copy's 32 KiB buffer.
	Copy bool
	Net  Net // TLS, link
}

// BulkWith is Bulk1 with opts.
func BulkWith(b *testing.B, tr Transport, opts BulkOptions) {
	b.ReportAllocs()
	e := newEnvOver(b, tr, opts.Net)
	defer e.close()
	cs, ss := e.openPair()
	w, r := cs, ss
	if !opts.C2S {
		w, r = ss, cs
	}
	// One chunk untimed first, so that lazily built per-stream state is not
	// charged to a run with small b.N.
	total := int64(b.N+1) * bulkChunk
	received := make(chan error, 1)
	rbuf := make([]byte, cmp.Or(opts.ReadSize, bulkChunk))
	go func() {
		var err error
		if opts.Copy {
			var n int64
			n, err = io.Copy(io.Discard, r)
			if err == nil && n != total {
				err = fmt.Errorf("io.Copy moved %d bytes, want %d", n, total)
			}
		} else {
			err = readN(r, total, rbuf)
		}
		e.fail(err) // unblocks the writer
		received <- err
	}()
	if _, err := w.Write(payload[:bulkChunk]); err != nil {
		e.fatalf("write: %v", err)
	}
	b.SetBytes(bulkChunk)
	b.ResetTimer()
	cpu := startCPU()
	for range b.N {
		if _, err := w.Write(payload[:bulkChunk]); err != nil {
			e.teardown()
			<-received
			e.fatalf("write: %v", err)
		}
	}
	if opts.Copy {
		if err := w.CloseWrite(); err != nil {
			e.fatalf("close write: %v", err)
		}
	}
	if err := <-received; err != nil {
		e.fatalf("read: %v", err)
	}
	b.StopTimer()
	cpu.report(b, int64(b.N)*bulkChunk)
}

// StreamsN opens n streams up front; each iteration every one of them sends
// streamsPayload bytes client to server from its own goroutine, and the
// iteration ends when every server stream has all of it. One untimed round
// warms up first. Besides MB/s it reports CPUPerMiB.
func StreamsN(b *testing.B, tr Transport, n int) { StreamsNOver(b, tr, n, Net{}) }

// StreamsNOver is StreamsN over nt (TLS).
func StreamsNOver(b *testing.B, tr Transport, n int, nt Net) {
	b.ReportAllocs()
	if tr.MaxStreams > 0 && tr.MaxStreams < n {
		b.Skipf("%s holds at most %d streams", tr.Name, tr.MaxStreams)
	}
	e := newEnvOver(b, tr, nt)
	defer e.close()
	cs, ss := e.openN(n)

	// Persistent workers, started once per round through their channel, so
	// the iterations allocate nothing of their own.
	var round sync.WaitGroup
	starts := make([]chan struct{}, 0, 2*n)
	worker := func(start chan struct{}, f func() error) {
		e.spawn(func() error {
			for range start {
				err := f()
				round.Done()
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	for i := range n {
		w, r := cs[i], ss[i]
		buf := make([]byte, bulkChunk)
		ws, rs := make(chan struct{}, 1), make(chan struct{}, 1)
		starts = append(starts, ws, rs)
		worker(ws, func() error { return writeN(w, streamsPayload, bulkChunk) })
		worker(rs, func() error { return readN(r, streamsPayload, buf) })
	}
	defer func() {
		for _, c := range starts {
			close(c)
		}
	}()
	// runRound fails the benchmark (from this goroutine) if any worker failed.
	runRound := func() {
		round.Add(len(starts))
		for _, c := range starts {
			c <- struct{}{}
		}
		// A worker that fails tears the pair down, so the others return
		// too; the timeout only catches a transport that deadlocks.
		if !waitTimeout(&round, 2*time.Minute) {
			e.teardown()
			round.Wait()
			e.fatalf("a round of %d x %d bytes did not finish in 2 minutes", n, streamsPayload)
		}
		e.check()
	}
	runRound()
	b.SetBytes(int64(n) * streamsPayload)
	cpu := startCPU()
	for b.Loop() {
		runRound()
	}
	cpu.report(b, int64(b.N)*int64(n)*streamsPayload)
}
