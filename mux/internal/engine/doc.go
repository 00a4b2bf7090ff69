// Package engine is the WSMUX/1 session state machine, with no I/O of its
// own: whole WebSocket messages, the time and the application's calls go
// in; events (a stream became readable or writable, was answered, a stream
// waits to be accepted, the session ended...) and batches of frames to
// write come out.
//
// An Engine knows no sockets, no goroutines and no clock: every call that
// depends on time takes the caller's monotonic now, and the caller runs
// Tick when NextTimer says. It never calls up into the code that drives
// it: what happened is recorded as events the driver takes (Events,
// PopStreamEvent) after each call. It is not safe for concurrent use: the
// driver serialises every call (package mux holds one mutex).
//
// A driver owns the transport and wakes the goroutines (or event-loop
// callbacks) that wait on the events. Its contract, in order:
//
//   - in: each received message to Feed; a failed read to PeerClosed,
//     WebSocketViolation or ReadFailed;
//   - out, for every batch (batch.go): NextBatch runs the timers and lays
//     out the batch (on ConnLost the driver calls Suspend or FailConnLost
//     first, then NextBatch again), the driver writes it, and BatchWritten
//     ends it, written or failed; a failed write also goes to WriteFailed;
//   - between batches: Tick when NextTimer says, and Ready before a
//     Write lays out its own batch (Batch.Direct);
//   - resumption: Suspend, Resume, AbandonResume.
//
// Package mux has three drivers over the same engine: goroutines (one
// reader, one writer), their fast paths (leader reads, direct small
// writes, spliced writes) and an event loop.
//
// Session resumption (resume.go, docs/spec/wsmux-resume-v1.md) is off
// unless Config.Resume is set and the peer agrees: the engine then counts
// and acknowledges received bytes, retains what it sent until the peer
// acknowledges it, and offers Suspend and Resume to a driver that lost
// its connection and got a new one.
//
// It must not import net (nor net/http), the mux package or anything that
// starts goroutines or reads the time of day; it imports frame and flow.
package engine
