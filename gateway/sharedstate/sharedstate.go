// Package sharedstate is the state the replicas of a gateway fleet share
// (docs/load-balancers.md): the one-time tickets already used, each
// caller's sessions and dial rate counted across the fleet, and the
// directory of replicas and of which replica holds each resumable session.
//
// Store is that state's one interface. Memory keeps it in one process (the
// single-replica default, and in-process fleets in tests); Redis keeps it in
// a Redis or Valkey server (`wsmux gateway --shared-state redis://...`). The
// package knows nothing of HTTP or the gateway: the gateway decides what a
// failed call means (docs/gateway.md, "Fleet").
package sharedstate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Store is the fleet's shared state. Every method honours ctx's deadline;
// an error other than the typed ones below means the store could not
// answer (down, slow, refused) and the caller picks its fallback.
type Store interface {
	// UseTicket records the ticket whose digest is d as used until exp; if
	// it was already recorded (by any replica) it returns ErrTicketUsed.
	UseTicket(ctx context.Context, d [sha256.Size]byte, exp time.Time) error
	// AcquireSession records session (an ID unique in the fleet) of caller,
	// held by replica, unless caller already holds limit sessions on live
	// replicas (limit <= 0: no limit): then an *OverLimitError. Sessions of
	// replicas whose heartbeat expired are no longer counted.
	AcquireSession(ctx context.Context, caller, replica, session string, limit int) error
	// ReleaseSession forgets a session AcquireSession recorded.
	ReleaseSession(ctx context.Context, caller, session string) error
	// TakeDial takes one of caller's dial tokens from a bucket of burst
	// tokens refilled at rate a second, shared by the fleet; when none is
	// left it returns how long until one is (and takes nothing).
	TakeDial(ctx context.Context, caller string, rate float64, burst int) (wait time.Duration, err error)

	// Heartbeat announces that replica is alive and reachable by the other
	// replicas at addr, for ttl.
	Heartbeat(ctx context.Context, replica, addr string, ttl time.Duration) error
	// Leave removes replica from the directory (a clean shutdown).
	Leave(ctx context.Context, replica string) error
	// ReplicaAddr returns the address a live replica announced, or
	// ErrNotFound when its heartbeat expired (or it left).
	ReplicaAddr(ctx context.Context, replica string) (string, error)
	// PutResumeOwner records that replica holds the resumable session of
	// the resume token whose SHA-256 is key, for ttl.
	PutResumeOwner(ctx context.Context, key [sha256.Size]byte, replica string, ttl time.Duration) error
	// RefreshResumeOwners extends the records of keys to ttl.
	RefreshResumeOwners(ctx context.Context, keys [][sha256.Size]byte, ttl time.Duration) error
	// ResumeOwner returns the replica recorded for key, or ErrNotFound.
	ResumeOwner(ctx context.Context, key [sha256.Size]byte) (string, error)
	// DropResumeOwners forgets the records of keys.
	DropResumeOwners(ctx context.Context, keys [][sha256.Size]byte) error

	// Close releases the store's connections.
	Close() error
}

var (
	// ErrTicketUsed: the ticket was already used (on any replica).
	ErrTicketUsed = errors.New("sharedstate: ticket already used")
	// ErrNotFound: no such record (or it expired).
	ErrNotFound = errors.New("sharedstate: not found")
)

// OverLimitError is AcquireSession's refusal: the caller already holds
// Held sessions across the fleet, Limit or more.
type OverLimitError struct{ Held, Limit int }

func (e *OverLimitError) Error() string {
	return fmt.Sprintf("sharedstate: the caller holds %d session(s) across the fleet, the limit is %d", e.Held, e.Limit)
}

// callerKey names a caller in keys: the digest of its ID, so that no
// caller ID (a token's name, a certificate's subject) is stored in clear
// and every key is printable.
func callerKey(caller string) string {
	d := sha256.Sum256([]byte(caller))
	return hex.EncodeToString(d[:16])
}
