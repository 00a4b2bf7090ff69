package bench

import (
	"sync"
	"testing"
	"time"
)

// The throughput workloads: bulk data over one stream (Bulk1) and over many
// streams at once (StreamsN), in MB/s and CPU per MiB.

// Bulk1 moves data over one stream in bulkChunk writes, client to server (c2s:
// the client masks on WebSocket transports) or server to client. The clock
// stops when the receiver has every byte. Besides MB/s it reports CPUPerMiB.
func Bulk1(b *testing.B, tr Transport, c2s bool) {
	b.ReportAllocs()
	e := newEnv(b, tr)
	defer e.close()
	cs, ss := e.openPair()
	w, r := cs, ss
	if !c2s {
		w, r = ss, cs
	}
	// One chunk untimed first, so that lazily built per-stream state is not
	// charged to a run with small b.N.
	total := int64(b.N+1) * bulkChunk
	received := make(chan error, 1)
	rbuf := make([]byte, bulkChunk)
	go func() {
		err := readN(r, total, rbuf)
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
func StreamsN(b *testing.B, tr Transport, n int) {
	b.ReportAllocs()
	if tr.MaxStreams > 0 && tr.MaxStreams < n {
		b.Skipf("%s holds at most %d streams", tr.Name, tr.MaxStreams)
	}
	e := newEnv(b, tr)
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
