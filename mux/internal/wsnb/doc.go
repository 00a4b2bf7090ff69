// Package wsnb is WebSocket message framing for an event loop: a parser
// that takes whatever bytes a non-blocking read returned and gives back
// whole binary messages and control frames, keeping the state of a
// partial frame between calls (it never waits for more bytes), and the
// framing of outgoing messages in the caller's buffers.
//
// It checks what package wsio checks (RFC 6455 and the WSMUX/1 mapping:
// binary messages only, masking by role, control frames final and short,
// a bound on the reassembled message decided from declared lengths before
// any payload is buffered) and reports violations with wsio's error
// types, so a driver handles both readers' errors alike. Buffers for
// partial messages come from pools and go back when the message is
// complete: a connection between messages holds none.
//
// It must not import net or package mux; it imports gobwas/ws, wsio (for
// its error types and header room) and nothing that starts goroutines.
package wsnb
