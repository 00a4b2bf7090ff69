// Package pool holds the reusable buffers of the mux: fixed-size receive
// chunks for the streams' queues and variable-size batch buffers for the
// session writer.
//
// Both pools keep pointers (never bare slices) in their sync.Pool, so Get and
// Put do not allocate in steady state, and each purpose has a pool of its
// own. The batch pool is a plain sync.Pool rather than bytebufferpool: see
// GetBatch.
//
// The package imports no Kubernetes code; it is internal to mux.
package pool
