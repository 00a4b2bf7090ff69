package netpoll

import (
	"sync"
	"time"
)

// Wheel is a hashed timer wheel: one goroutine (while any timer is set)
// and one runtime timer serve every Timer, however many. Deadlines are
// rounded up to the wheel's tick, so a Timer fires at or after its
// deadline, at most a tick (plus scheduling delay) late; timers due in the
// same tick fire together.
//
// Each slot holds the timers whose deadline falls in its tick, modulo the
// wheel's length: a timer further away than one turn waits in its slot
// and is looked at once per turn until it is due.
type Wheel struct {
	tick  time.Duration
	epoch time.Time

	mu      sync.Mutex
	slots   []Timer // sentinels of circular lists
	count   int     // timers set
	cur     int64   // last tick processed
	sleepTo int64   // tick the goroutine sleeps until (0: not running)
	running bool
	wake    chan struct{}
}

// Timer is one timer of a Wheel, embedded in its owner (its zero value is
// ready for Init). F runs on the wheel's goroutine: it must not block.
type Timer struct {
	f          func()
	w          *Wheel
	at         int64 // deadline, in ticks of w
	prev, next *Timer
}

// NewWheel returns a Wheel of slots slots of tick each.
func NewWheel(tick time.Duration, slots int) *Wheel {
	w := &Wheel{tick: tick, epoch: time.Now(), slots: make([]Timer, slots), wake: make(chan struct{}, 1)}
	for i := range w.slots {
		s := &w.slots[i]
		s.prev, s.next = s, s
	}
	return w
}

// Init binds t to w and f.
func (t *Timer) Init(w *Wheel, f func()) { t.w, t.f = w, f }

// ticks returns the wheel tick at which a deadline d from now falls
// (rounded up).
func (w *Wheel) ticks(at time.Time) int64 {
	d := at.Sub(w.epoch)
	return int64((d + w.tick - 1) / w.tick)
}

// Reset sets t to fire after d (replacing any earlier setting).
func (t *Timer) Reset(d time.Duration) {
	w := t.w
	at := w.ticks(time.Now().Add(d))
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.next != nil {
		if t.at == at {
			return
		}
		t.unlink()
		w.count--
	}
	if at <= w.cur {
		at = w.cur + 1
	}
	t.at = at
	s := &w.slots[at%int64(len(w.slots))]
	t.prev, t.next = s.prev, s
	s.prev.next = t
	s.prev = t
	w.count++
	switch {
	case !w.running:
		w.running = true
		w.sleepTo = at
		go w.run()
	case at < w.sleepTo:
		w.sleepTo = at
		w.kick()
	}
}

// Stop unsets t; it reports whether t was set. A timer whose function is
// already running is not set any more.
func (t *Timer) Stop() bool {
	w := t.w
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.next == nil {
		return false
	}
	t.unlink()
	w.count--
	if w.count == 0 && w.running {
		w.kick() // its goroutine exits now rather than at the next tick it slept for
	}
	return true
}

// kick wakes the wheel's goroutine (w.mu held).
func (w *Wheel) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (t *Timer) unlink() {
	t.prev.next = t.next
	t.next.prev = t.prev
	t.prev, t.next = nil, nil
}

// Len returns the number of timers set.
func (w *Wheel) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

// run is the wheel's goroutine: it sleeps until the next non-empty tick,
// fires what is due and exits when no timer is left.
func (w *Wheel) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var fired []*Timer
	for {
		w.mu.Lock()
		now := int64(time.Since(w.epoch) / w.tick) // the last tick that began
		fired = w.advance(now, fired[:0])
		if w.count == 0 {
			w.running = false
			w.sleepTo = 0
			w.mu.Unlock()
			w.fire(fired)
			return
		}
		w.sleepTo = w.nextTick()
		d := time.Until(w.epoch.Add(time.Duration(w.sleepTo) * w.tick))
		w.mu.Unlock()
		w.fire(fired)
		timer.Reset(max(d, 0))
		select {
		case <-timer.C:
		case <-w.wake:
			if !timer.Stop() {
				<-timer.C
			}
		}
	}
}

// advance appends the timers due by tick now to fired, unlinked (w.mu
// held).
func (w *Wheel) advance(now int64, fired []*Timer) []*Timer {
	if now <= w.cur {
		return fired
	}
	n := int64(len(w.slots))
	from := w.cur + 1
	if now-from >= n {
		from = now - n + 1 // every slot once
	}
	for tk := from; tk <= now; tk++ {
		s := &w.slots[tk%n]
		for t := s.next; t != s; {
			next := t.next
			if t.at <= now {
				t.unlink()
				w.count--
				fired = append(fired, t)
			}
			t = next
		}
	}
	w.cur = now
	return fired
}

// nextTick returns the first tick after w.cur whose slot is not empty
// (w.mu held, w.count > 0).
func (w *Wheel) nextTick() int64 {
	n := int64(len(w.slots))
	for i := int64(1); i <= n; i++ {
		s := &w.slots[(w.cur+i)%n]
		if s.next != s {
			return w.cur + i
		}
	}
	return w.cur + n
}

// fire runs the functions of the fired timers (w.mu not held).
func (w *Wheel) fire(fired []*Timer) {
	for i, t := range fired {
		t.f()
		fired[i] = nil
	}
}
