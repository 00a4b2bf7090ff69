package ops

import (
	"context"
	"sync"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux"
)

// Tracker is the registry of a server's live sessions: it sums their
// counters for the metrics and drains them on shutdown.
type Tracker struct {
	mu       sync.Mutex
	live     map[*entry]struct{}
	total    map[string]uint64
	finished mux.Stats // counters of ended wsmux sessions
	idle     chan struct{}
	draining bool
	// aborted counts what the last Drain closed: sessions and their open
	// wsmux streams.
	abortedSessions, abortedStreams int
}

type entry struct {
	proto string
	sess  *mux.Session // nil for SPDY
	close func()
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{live: map[*entry]struct{}{}, total: map[string]uint64{}}
}

// Add registers a live session. proto is "wsmux" or "spdy"; sess is the
// mux session (nil for SPDY); closeFn ends it at once. The returned done
// must be called once the session has ended. A session added while the
// tracker drains is told to go away at once.
func (t *Tracker) Add(proto string, sess *mux.Session, closeFn func()) (done func()) {
	e := &entry{proto: proto, sess: sess, close: closeFn}
	t.mu.Lock()
	t.live[e] = struct{}{}
	t.total[proto]++
	draining := t.draining
	t.mu.Unlock()
	if draining && sess != nil {
		_ = sess.GoAway(frame.NoError)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			delete(t.live, e)
			if e.sess != nil {
				addStats(&t.finished, e.sess.Stats())
			}
			if len(t.live) == 0 && t.idle != nil {
				close(t.idle)
				t.idle = nil
			}
		})
	}
}

// Open returns the number of live sessions and of their open wsmux
// streams.
func (t *Tracker) Open() (sessions, streams int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for e := range t.live {
		if e.sess != nil {
			streams += e.sess.NumStreams()
		}
	}
	return len(t.live), streams
}

// Aborted returns what the last Drain had to close when its context ended:
// sessions, and their open wsmux streams.
func (t *Tracker) Aborted() (sessions, streams int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.abortedSessions, t.abortedStreams
}

// Len returns the number of live sessions.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}

type snapshot struct {
	active, total map[string]uint64
	streamsActive int
	suspended     int // live sessions whose connection dropped
	stats         mux.Stats
}

func (t *Tracker) snapshot() snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := snapshot{active: map[string]uint64{}, total: map[string]uint64{}}
	addStats(&s.stats, t.finished)
	for k, v := range t.total {
		s.total[k] = v
	}
	for e := range t.live {
		s.active[e.proto]++
		if e.sess != nil {
			addStats(&s.stats, e.sess.Stats())
			s.streamsActive += e.sess.NumStreams()
			if e.sess.Suspended() {
				s.suspended++
			}
		}
	}
	return s
}

// Drain sends GOAWAY(NO_ERROR) to every live wsmux session (new sessions
// are told the same as they arrive; suspended ones are closed), then
// waits until every session has ended or ctx is done; then it closes
// whatever is left and waits (a few seconds at most) for those to end. It reports whether the drain finished before ctx.
func (t *Tracker) Drain(ctx context.Context) bool {
	t.mu.Lock()
	t.draining = true
	var sess []*mux.Session
	for e := range t.live {
		if e.sess != nil {
			sess = append(sess, e.sess)
		}
	}
	t.mu.Unlock()
	for _, s := range sess {
		// A suspended session (resumption) cannot drain: its client's
		// resume would have to reach this server, which stopped listening.
		if s.Suspended() {
			_ = s.Close()
			continue
		}
		_ = s.GoAway(frame.NoError)
	}
	if t.wait(ctx) {
		return true
	}
	t.mu.Lock()
	var closers []func()
	t.abortedSessions, t.abortedStreams = len(t.live), 0
	for e := range t.live {
		closers = append(closers, e.close)
		if e.sess != nil {
			t.abortedStreams += e.sess.NumStreams()
		}
	}
	t.mu.Unlock()
	for _, c := range closers {
		if c != nil {
			c()
		}
	}
	// Closed sessions end promptly; their handlers' last steps too.
	wctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	t.wait(wctx)
	return false
}

// closeWait bounds Drain's wait for sessions it closed to end.
const closeWait = 5 * time.Second

// wait waits until no session is live or ctx is done.
func (t *Tracker) wait(ctx context.Context) bool {
	t.mu.Lock()
	if len(t.live) == 0 {
		t.mu.Unlock()
		return true
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	ch := t.idle
	t.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}
