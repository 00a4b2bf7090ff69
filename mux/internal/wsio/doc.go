// Package wsio is the WebSocket layer of the mux: binary message I/O over a
// connection upgraded to the WSMUX/1 subprotocol (Conn), on top of
// github.com/gobwas/ws's low-level API. The opening handshake itself is the
// module's internal/wshandshake, shared with the adapters.
//
// Conn is built for one reader goroutine and one writer goroutine:
//
//   - ReadMessage reassembles fragmented messages into a reused per-Conn
//     buffer, unmasks them in place, and enforces every RFC 6455 rule the
//     mux depends on (no text frames, no RSV bits, the right mask bit for the
//     role, well-formed control frames, a message size bound checked before
//     any payload is read). It never writes to the socket: a ping's pong and
//     a close reply are queued for the writer, which sends them with
//     FlushControl (gobwas/ws does no write locking, so a single writer owns
//     the socket).
//   - WriteMessage sends a caller-owned batch buffer, which has HeaderRoom
//     bytes reserved in front of its payload, as one binary message with one
//     conn.Write, masking in place on the client.
//
// Both directions are allocation-free per message in steady state.
//
// The package imports no Kubernetes code; it is internal to mux.
package wsio
