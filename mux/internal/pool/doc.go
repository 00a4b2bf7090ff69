// Package pool holds the reusable buffers of the mux: fixed-size receive
// chunks for the streams' queues and variable-size batch buffers for the
// session writer.
//
// Both pools keep pointers (never bare slices) in their sync.Pool, so Get and
// Put do not allocate in steady state. Each purpose has a pool of its own: a
// pool shared between 12-byte control buffers and 64 KiB data buffers would
// defeat bytebufferpool's size calibration (see research 5.2).
//
// The package imports no Kubernetes code; it is internal to mux.
package pool
