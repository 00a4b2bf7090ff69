// Package pool holds the reusable buffers of the mux: fixed-size chunks for
// the streams' queues, variable-size batch buffers for the session writer,
// and reference-counted message buffers (Msg) for the reader, whose runs of
// DATA a stream's receive queue may keep in place until the application
// reads them.
//
// Every pool keeps pointers (never bare slices) in its sync.Pool, so Get and
// Put do not allocate in steady state, and each purpose has a pool of its
// own. The batch pool is a plain sync.Pool rather than bytebufferpool: see
// GetBatch. Message buffers released by a connection's queues go back to
// that connection first (MsgCache).
//
// The package imports nothing of the project and no Kubernetes code; it is
// internal to mux.
package pool
