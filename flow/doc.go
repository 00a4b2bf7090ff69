// Package flow is the credit accounting of wsmux flow control: pure arithmetic
// for one direction of one stream, or of the whole session.
//
// The rules it implements are section 8 (flow control) of the WSMUX/1
// specification, docs/spec/wsmux-v1.md.
//
// A [Sender] tracks the credit the peer granted us: how many DATA payload
// bytes we may still send, raised by the peer's WINDOW_UPDATE frames.
//
// A [Receiver] tracks the credit we granted the peer. It rejects DATA beyond
// that credit (FLOW_CONTROL_ERROR), and returns credit when the application
// reads (never on arrival): a WINDOW_UPDATE is due once a quarter of the
// current window has been consumed. Discarded bytes (reset or closed
// streams) are credited back at once. The window is auto-tuned the way
// quic-go does it: when more than half of the window was read in an epoch
// that took less than 4 × fraction × smoothed RTT, the window doubles, up to
// a configured maximum and only if an optional memory [Budget] approves the
// growth. A session keeps its window at least twice the largest stream
// window with [Receiver.EnsureWindow].
//
// The package imports nothing of this module, only the standard library. It
// has no goroutines, no locks, no I/O and never reads a clock: the caller
// synchronises access and passes its own monotonic time (a time.Duration
// since any fixed origin) and RTT estimate, so tests and fuzzers drive it
// with fake clocks. No method allocates.
package flow
