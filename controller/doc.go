// Package controller is for programs that stand in front of a wsmux
// gateway (`wsmux gateway`), authenticate and authorize their clients
// themselves (a platform's API server, as in a PaaS's "run" or "logs -f"),
// and then let the gateway carry the long-lived session. It offers the two
// designs of docs/controller.md:
//
//   - one-time tickets: MintTicket signs a short-lived ticket (HMAC-SHA256,
//     the format of docs/spec/wsmux-ticket-v1.md) naming the caller and the
//     one target it may open; the client presents it to the gateway, which
//     accepts it once;
//   - socket handoff: Handoff (or HandoffHTTP from a net/http handler)
//     passes the client's connected socket to the gateway over a Unix
//     SOCK_SEQPACKET socket (SCM_RIGHTS) with the caller's identity, the
//     target and the bytes already read from it.
//
// The gateway verifies tickets and receives handoffs with the same types
// (ParseTicket, HandoffMessage). The package imports the standard library
// only, so any controller can take it.
package controller
