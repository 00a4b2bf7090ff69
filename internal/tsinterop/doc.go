// Package tsinterop holds the interoperability tests of the TypeScript
// WSMUX/1 client (clients/ts) with this repository's Go implementation: the
// TS client against a Go mux server (data both ways checksummed, half-close,
// reset and STOP_SENDING observed on the other side), `wsmux conformance
// --listen` against the TS client and `wsmux conformance --server` against
// the TS session in the server role. It has no code of its own besides test
// helpers (node.go), which find node and the compiled client; it must not be
// imported.
package tsinterop
