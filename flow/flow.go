package flow

import (
	"math/bits"
	"time"
)

// MaxWindow is the largest window either side may ever have: 2^31-1 bytes.
// A WINDOW_UPDATE that would take the sender's credit above it is a
// FLOW_CONTROL_ERROR.
const MaxWindow = 1<<31 - 1

// Error is the type of the sentinel errors of this package. The caller maps
// each value to a wire error code.
type Error string

// Error implements the error interface.
func (e Error) Error() string { return string(e) }

// The errors of this package. They are comparable constants: test them with
// == or errors.Is.
const (
	// ErrFlowControl reports that the peer sent more DATA payload than it
	// was granted. Wire code FLOW_CONTROL_ERROR (3).
	ErrFlowControl = Error("flow: peer exceeded its flow-control window")
	// ErrOverflow reports a WINDOW_UPDATE that would take the sender's
	// credit above MaxWindow. Wire code FLOW_CONTROL_ERROR (3).
	ErrOverflow = Error("flow: window update overflows the maximum window")
	// ErrZeroDelta reports a WINDOW_UPDATE with a delta of 0. Wire code
	// PROTOCOL_ERROR (1).
	ErrZeroDelta = Error("flow: window update with zero delta")
)

// clampWindow limits a configured window to MaxWindow.
func clampWindow(w uint32) int64 {
	if w > MaxWindow {
		return MaxWindow
	}
	return int64(w)
}

// Sender tracks the credit the peer granted us for one direction of a stream
// or of the session. The zero value has no credit; call Init first.
//
// Sender is not safe for concurrent use: the caller synchronises.
type Sender struct {
	avail int64 // 0 <= avail <= MaxWindow
	debt  int64 // owed after Adjust lowered the credit below zero; grants pay it first
}

// Init sets the credit to the peer's initial window. A value above MaxWindow
// is clamped to MaxWindow.
func (s *Sender) Init(initial uint32) {
	s.avail = clampWindow(initial)
}

// Available returns how many payload bytes may be sent now. It is never
// negative and never above MaxWindow.
func (s *Sender) Available() int64 { return s.avail }

// Consume records that n payload bytes are being sent and reports whether
// that was allowed. If n is negative or above Available it returns false
// and changes nothing: sending more than Available is the caller's bug, and
// the caller must not send the bytes.
func (s *Sender) Consume(n int) bool {
	if n < 0 || int64(n) > s.avail {
		return false
	}
	s.avail -= int64(n)
	return true
}

// Grant applies a WINDOW_UPDATE delta from the peer. It returns ErrZeroDelta
// for a delta of 0 and ErrOverflow if Available()+delta would exceed
// MaxWindow (delta above MaxWindow included); on error the credit is
// unchanged.
//
// While a debt is owed (Adjust), the delta pays it first and only the rest
// becomes credit.
func (s *Sender) Grant(delta uint32) error {
	if delta == 0 {
		return ErrZeroDelta
	}
	paid := min(s.debt, int64(delta))
	rest := int64(delta) - paid
	if rest > MaxWindow-s.avail {
		return ErrOverflow
	}
	s.debt -= paid
	s.avail += rest
	return nil
}

// Adjust moves the credit by delta: the peer changed its initial window
// (SETTINGS) after we had counted on the old one. An increase is granted
// (ErrOverflow past MaxWindow, the credit then unchanged); a decrease takes
// what credit is left and owes the rest, which later grants pay before
// they add credit.
func (s *Sender) Adjust(delta int64) error {
	if delta >= 0 {
		paid := min(s.debt, delta)
		if delta-paid > MaxWindow-s.avail {
			return ErrOverflow
		}
		s.debt -= paid
		s.avail += delta - paid
		return nil
	}
	owe := -delta
	take := min(owe, s.avail)
	s.avail -= take
	s.debt += owe - take
	return nil
}

// Debt returns what Adjust left owed.
func (s *Sender) Debt() int64 { return s.debt }

// Budget approves window growth: the memory manager of a connection, of the
// process, or both. Receiver calls Reserve before every increase of its
// window above the initial window, and Release with what it gives back: the
// part above Initial of a window that shrinks under SetLimit, and everything
// still reserved when the caller calls Receiver.Release. A nil Budget
// approves every increase.
type Budget interface {
	// Reserve asks for n > 0 more bytes and reports whether they were
	// granted. A refusal leaves the window as it is.
	Reserve(n int64) bool
	// Release gives back n > 0 bytes obtained from Reserve.
	Release(n int64)
}

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// Initial is the initial window, as announced to the peer (for example
	// 256 KiB for a stream, 1 MiB for the session). Values above MaxWindow
	// are clamped. The initial window is the caller's own fixed cost: it is
	// not reserved from Budget.
	Initial uint32
	// Max is the auto-tuning ceiling (for example 16 MiB for a stream,
	// 64 MiB for the session). A value below Initial is raised to Initial;
	// Max == Initial disables growth. Values above MaxWindow are clamped.
	Max uint32
	// Budget approves every growth of the window above Initial. It may be
	// nil (always approve).
	Budget Budget
}

// Receiver tracks the credit we granted the peer for one direction of a
// stream or of the session, and decides when to send a WINDOW_UPDATE and
// how large the window should grow. The zero value has a window of 0 and
// rejects every byte; call Init first.
//
// Credit is conserved: at all times
//
//	Outstanding() + Buffered() + Pending() == Window()
//
// and Window() never exceeds the configured Max nor MaxWindow.
//
// Receiver is not safe for concurrent use: the caller synchronises.
type Receiver struct {
	window      int64 // current window size, <= max
	initial     int64
	max         int64
	outstanding int64 // granted but not yet received
	buffered    int64 // received but not yet consumed
	pending     int64 // consumed (or grown) but not yet announced
	reserved    int64 // growth reserved from budget, not yet released
	budget      Budget

	epochStart time.Duration // caller's clock at the start of the epoch
	epochRead  int64         // bytes consumed by the application this epoch

	// Small fields last, packed into one word (a stream holds a Receiver).
	limit        uint32 // soft cap on the window (SetLimit); 0: max
	released     bool   // Release was called: no more growth
	epochStarted bool
}

// Init (re)initialises r with cfg: the peer may send cfg.Initial bytes. If r
// was in use and still holds a Budget reservation, that reservation is
// released first, so a Receiver may be reused.
func (r *Receiver) Init(cfg ReceiverConfig) {
	r.Release()
	initial := clampWindow(cfg.Initial)
	max := clampWindow(cfg.Max)
	if max < initial {
		max = initial
	}
	*r = Receiver{
		window:      initial,
		initial:     initial,
		max:         max,
		outstanding: initial,
		budget:      cfg.Budget,
	}
}

// Window returns the current window size.
func (r *Receiver) Window() uint32 { return uint32(r.window) }

// Outstanding returns the credit the peer may still use: granted minus
// received. It is never negative.
func (r *Receiver) Outstanding() int64 { return r.outstanding }

// Buffered returns the bytes received but not yet consumed by the
// application. It is never negative.
func (r *Receiver) Buffered() int64 { return r.buffered }

// Pending returns the credit not yet announced to the peer: bytes consumed
// or discarded that no returned delta has covered yet. Between calls it is
// always below a quarter of the window, since reaching a quarter makes an
// update due.
func (r *Receiver) Pending() int64 { return r.pending }

// Receive records n payload bytes arriving from the peer. It returns
// ErrFlowControl, leaving the state unchanged, if n > Outstanding(). A
// negative n is treated as 0.
func (r *Receiver) Receive(n int) error {
	if n <= 0 {
		return nil
	}
	if int64(n) > r.outstanding {
		return ErrFlowControl
	}
	r.outstanding -= int64(n)
	r.buffered += int64(n)
	return nil
}

// Consume records that the application read n buffered bytes. n is clamped
// to [0, Buffered()].
//
// now is the caller's monotonic time and rtt its current smoothed RTT
// estimate (0 or negative: unknown, no auto-tuning).
//
// It returns the WINDOW_UPDATE delta to send now, or 0 when no update is
// due. An update is due once the consumed but unannounced credit reaches a
// quarter of the current window. When it is, the window may first grow
// (quic-go's rule): if more than half of the window was read in the current
// epoch and the epoch took less than 4 × (read in epoch / window) × rtt, the
// window doubles, capped at Max and only if Budget approves; the growth is
// part of the returned delta. As in quic-go, the epoch is evaluated (and a
// new one started at now) only at an update where more than half the
// window was read in it and rtt is known; otherwise it runs on, so reads
// spread over several quarter-window updates still add up. The first epoch
// starts at the first Consume.
func (r *Receiver) Consume(n int, now, rtt time.Duration) (delta uint32) {
	if n <= 0 {
		return 0
	}
	c := min(int64(n), r.buffered)
	if c == 0 {
		return 0
	}
	if !r.epochStarted {
		r.epochStarted = true
		r.epochStart = now
	}
	r.buffered -= c
	r.pending += c
	r.epochRead += c
	r.shrink()
	r.restore()
	if !r.updateDue() {
		return 0
	}
	r.autoTune(now, rtt)
	return r.flush()
}

// Discard is Receive followed at once by a consumption, for bytes that
// arrive for a reset or closed stream (or that nobody will read): they are
// credited back immediately. It returns ErrFlowControl, changing nothing,
// like Receive. Otherwise it returns the WINDOW_UPDATE delta due now under
// the quarter-window rule, or 0. Discarded bytes never drive auto-tuning.
func (r *Receiver) Discard(n int) (delta uint32, err error) {
	if err := r.Receive(n); err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, nil
	}
	r.buffered -= int64(n)
	r.pending += int64(n)
	r.shrink()
	r.restore()
	if !r.updateDue() {
		return 0, nil
	}
	return r.flush(), nil
}

// MinLimitWindow is the smallest window SetLimit can hold a Receiver to
// (or its Initial window, if that is smaller).
const MinLimitWindow = 16 << 10

// SetLimit sets a soft cap on the window: it grows no further than
// min(Max, limit), and a window above that shrinks back as the application
// reads, by announcing less credit than it consumed (never by taking back
// credit already announced), releasing the Budget reservation as it goes.
// The cap may be below Initial, down to MinLimitWindow. A limit of 0
// removes the cap; a window below Initial then returns to Initial at the
// next Consume or Discard that moves bytes, the extra credit going out with
// the next update (Initial is never charged to the Budget; after Release it
// does not return). The caller uses it
// to keep a stream's window near what its path needs while other streams
// share the connection: credit beyond that only queues bytes in front of
// theirs.
func (r *Receiver) SetLimit(limit uint32) {
	r.limit = limit
}

// ceiling is the largest window allowed now.
func (r *Receiver) ceiling() int64 {
	if r.limit == 0 {
		return r.max
	}
	return max(r.floor(), min(r.max, int64(r.limit)))
}

// floor is the smallest window a limit can hold r to.
func (r *Receiver) floor() int64 { return min(r.initial, MinLimitWindow) }

// restore brings a window that a limit held below Initial back up to
// Initial (or the current ceiling) once the limit allows it.
func (r *Receiver) restore() {
	if t := min(r.initial, r.ceiling()); r.window < t && !r.released {
		r.pending += t - r.window
		r.window = t
	}
}

// shrink withholds pending credit while the window is above the ceiling.
func (r *Receiver) shrink() {
	excess := r.window - r.ceiling()
	if excess <= 0 || r.pending == 0 {
		return
	}
	s := min(excess, r.pending)
	r.pending -= s
	r.window -= s
	if r.budget != nil && !r.released {
		rel := min(s, r.reserved)
		if rel > 0 {
			r.budget.Release(rel)
			r.reserved -= rel
		}
	}
}

// EnsureWindow raises the window to at least w, capped at Max (or the
// SetLimit cap), if Budget approves the part of the increase above Initial; it is how the session window is kept at
// least twice the largest stream window. It returns the increase, which the
// caller must announce to the peer as a WINDOW_UPDATE delta, or 0 if the
// window is already large enough, is at Max, the Budget refused, or Release
// was called.
func (r *Receiver) EnsureWindow(w uint32) (delta uint32) {
	target := min(clampWindow(w), r.ceiling())
	g := target - r.window
	if !r.grow(g) {
		return 0
	}
	r.outstanding += g
	return uint32(g)
}

// Release gives back to the Budget every byte reserved by growth; call it
// when the stream (or session) ends. Afterwards the window no longer grows,
// so nothing more is reserved. Release is idempotent; Init starts afresh.
func (r *Receiver) Release() {
	if r.reserved > 0 && r.budget != nil {
		r.budget.Release(r.reserved)
	}
	r.reserved = 0
	r.released = true
}

// updateDue reports whether the unannounced credit reached a quarter of the
// window.
func (r *Receiver) updateDue() bool {
	return r.pending > 0 && 4*r.pending >= r.window
}

// flush announces all pending credit and returns it as the delta.
func (r *Receiver) flush() uint32 {
	d := r.pending
	r.pending = 0
	r.outstanding += d
	return uint32(d) // d <= window <= MaxWindow
}

// autoTune applies quic-go's window doubling rule at an update.
func (r *Receiver) autoTune(now, rtt time.Duration) {
	if 2*r.epochRead <= r.window || rtt <= 0 {
		return
	}
	elapsed := max(now-r.epochStart, 0)
	if fastEpoch(elapsed, r.epochRead, r.window, rtt) {
		g := min(2*r.window, r.ceiling()) - r.window
		if r.grow(g) {
			r.pending += g
		}
	}
	r.epochStart = now
	r.epochRead = 0
}

// fastEpoch reports elapsed < 4 × (read/window) × rtt, computed exactly as
// elapsed × window < 4 × read × rtt in 128-bit arithmetic. All arguments are
// non-negative (rtt and window positive).
func fastEpoch(elapsed time.Duration, read, window int64, rtt time.Duration) bool {
	lh, ll := bits.Mul64(uint64(elapsed), uint64(window))
	rh, rl := bits.Mul64(uint64(read), uint64(rtt)) // < 2^126
	rh, rl = rh<<2|rl>>62, rl<<2
	return lh < rh || (lh == rh && ll < rl)
}

// grow raises the window by g > 0 if allowed, reserving g from the budget.
// It does not touch outstanding or pending.
func (r *Receiver) grow(g int64) bool {
	if g <= 0 || r.released {
		return false
	}
	// Only growth above Initial is charged: a window that a limit held
	// below Initial regrows up to it for free.
	if need := max(r.window+g-r.initial, 0) - r.reserved; r.budget != nil && need > 0 {
		if !r.budget.Reserve(need) {
			return false
		}
		r.reserved += need
	}
	r.window += g
	return true
}

// check verifies the invariants of r; tests call it after every operation.
func (r *Receiver) check() error {
	switch {
	case r.outstanding < 0, r.buffered < 0, r.pending < 0:
		return Error("flow: negative credit")
	case r.outstanding+r.buffered+r.pending != r.window:
		return Error("flow: credit not conserved")
	case r.window > r.max, r.max > MaxWindow, r.window < r.floor():
		return Error("flow: window out of bounds")
	case r.pending > 0 && 4*r.pending >= r.window:
		return Error("flow: due update not sent")
	case r.budget != nil && !r.released && r.reserved != max(r.window-r.initial, 0):
		return Error("flow: budget reservation does not match growth")
	case r.reserved < 0:
		return Error("flow: negative reservation")
	}
	return nil
}
