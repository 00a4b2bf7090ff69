// Package wshandshake is the one RFC 6455 opening handshake of the module,
// negotiating WSMUX/1's WebSocket subprotocol (Subprotocol, "wsmux.v1"):
//
//   - Dial connects to a ws://, wss://, http:// or https:// URL and upgrades
//     the connection (what mux.Dial uses);
//   - PrepareRequest and CheckResponse are the same client side split in two,
//     for an http.RoundTripper that must hand the 101 *http.Response itself
//     to its caller (the Kubernetes adapter's RoundTripper, as client-go
//     expects);
//   - Upgrade (and UpgradeAcceptingPOST, for clients that kept kubectl's
//     SPDY method) answers an upgrade request on a net/http server with a
//     101 carrying the caller's extra headers (X-Stream-Protocol-Version).
//
// Failed handshakes are *HandshakeError on both sides. What follows the
// handshake, WebSocket framing and the mux, belongs to mux/internal/wsio
// and mux.
//
// It is imported by mux and by adapters, so it must import only the
// standard library: no Kubernetes, no gobwas/ws, and no package of this
// module.
package wshandshake
