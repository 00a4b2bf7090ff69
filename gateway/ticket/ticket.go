// Package ticket is the gateway's side of one-time tickets
// (docs/controller.md, format in docs/spec/wsmux-ticket-v1.md): the key
// files (--ticket-key, two keys during a rollover), the memory of used
// tickets that refuses replays, and the HTTP handler that finds a ticket
// in a request, checks it and passes the request on as the ticket's
// caller. It imports the controller package (the format) and auth (the
// caller), never the gateway itself: the gateway's ServeAs is handed in.
package ticket

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/sharedstate"
)

// MaxKeys is how many keys the gateway holds at once: the current one and,
// during a rollover, the next (or the previous).
const MaxKeys = 2

// ParseKeys reads a key file: one key per line in standard base64, at
// least controller.MinKeySize bytes; blank lines and # comments skipped.
func ParseKeys(name string, b []byte) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(l)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not standard base64: write keys as the output of: head -c 32 /dev/urandom | base64", name, n)
		}
		if len(k) < controller.MinKeySize {
			return nil, fmt.Errorf("%s:%d: a key of %d bytes: want at least %d (head -c 32 /dev/urandom | base64)", name, n, len(k), controller.MinKeySize)
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no key in file", name)
	}
	return keys, nil
}

// ReadKeys reads every key file; more than MaxKeys keys in all is an
// error (a rollover needs two; more widens what a leaked key opens).
func ReadKeys(paths []string) ([][]byte, error) {
	var all [][]byte
	seen := map[[sha256.Size]byte]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		keys, err := ParseKeys(p, b)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			d := sha256.Sum256(k)
			if prev, dup := seen[d]; dup {
				return nil, fmt.Errorf("%s: the same key as in %s", p, prev)
			}
			seen[d] = p
			all = append(all, k)
		}
	}
	if len(all) > MaxKeys {
		return nil, fmt.Errorf("%d ticket keys: at most %d (the current key and, during a rollover, the next one)", len(all), MaxKeys)
	}
	return all, nil
}

// ErrFull is the refusal of a ticket the gateway cannot remember: as many
// unexpired tickets as Verifier.MaxOutstanding are already used.
var ErrFull = errors.New("too many tickets used in the last minute: retry shortly")

// SharedTickets is the part of a fleet's shared state (a
// sharedstate.Store) that remembers used tickets.
type SharedTickets interface {
	UseTicket(ctx context.Context, d [sha256.Size]byte, exp time.Time) error
}

// ErrUnavailable is the refusal of a ticket when the fleet's shared state
// (Verifier.Shared) does not answer.
var ErrUnavailable = errors.New("the gateway cannot check tickets against its fleet's shared state now: retry shortly")

// Verifier checks tickets against the keys and remembers the ones used
// until they expire, so that each is accepted once. Its zero value has no
// keys; set them with SetKeys.
type Verifier struct {
	// Now is the clock (tests inject one); nil: time.Now.
	Now func() time.Time
	// MaxOutstanding bounds the used, unexpired tickets remembered (0:
	// DefaultMaxOutstanding); beyond it new tickets are refused (ErrFull),
	// never forgotten early.
	MaxOutstanding int
	// Shared, when set, records used tickets in a fleet's shared state
	// instead of this process's memory (MaxOutstanding does not apply), so
	// that a ticket opens one session across the fleet. When it does not
	// answer, tickets are refused with ErrUnavailable: fail closed, as a
	// replay cannot be ruled out.
	Shared SharedTickets

	keys atomic.Pointer[[][]byte]

	mu        sync.Mutex
	used      map[[sha256.Size]byte]int64 // payload digest -> exp
	nextSweep int
}

// DefaultMaxOutstanding is Verifier.MaxOutstanding's default: about 1,600
// sessions a second, each ticket remembered for up to 65 s.
const DefaultMaxOutstanding = 100_000

// SetKeys replaces the keys (a reload during a rollover): tickets signed
// with any of them are accepted.
func (v *Verifier) SetKeys(keys [][]byte) {
	k := append([][]byte(nil), keys...)
	v.keys.Store(&k)
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// Verify checks the ticket s for a request for t and, if it passes,
// records it as used: a second Verify of it fails with
// controller.ReasonReplayed. Errors are *controller.TicketError, or
// ErrFull.
func (v *Verifier) Verify(s string, t controller.Target) (controller.Claims, error) {
	var keys [][]byte
	if k := v.keys.Load(); k != nil {
		keys = *k
	}
	c, digest, err := controller.ParseTicket(keys, s)
	if err != nil {
		return c, err
	}
	now := v.now()
	if err := c.CheckTime(now); err != nil {
		return c, err
	}
	if err := c.CheckTarget(t); err != nil {
		return c, err
	}
	return c, v.use(digest, c.Expires, now.Unix())
}

// use records a ticket as used until exp, or refuses it.
func (v *Verifier) use(d [sha256.Size]byte, exp, now int64) error {
	if v.Shared != nil {
		err := v.Shared.UseTicket(context.Background(), d, time.Unix(exp, 0))
		switch {
		case errors.Is(err, sharedstate.ErrTicketUsed):
			return replayed()
		case err != nil:
			return fmt.Errorf("%w (%v)", ErrUnavailable, err)
		}
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.used == nil {
		v.used = map[[sha256.Size]byte]int64{}
	}
	if e, ok := v.used[d]; ok && e > now {
		return replayed()
	}
	limit := v.MaxOutstanding
	if limit <= 0 {
		limit = DefaultMaxOutstanding
	}
	// Sweep the expired ones when the map has doubled since the last
	// sweep, or before refusing: amortized O(1) per ticket.
	if len(v.used) >= limit || len(v.used) >= v.nextSweep {
		for k, e := range v.used {
			if e <= now {
				delete(v.used, k)
			}
		}
		v.nextSweep = max(2*len(v.used), 1024)
	}
	if len(v.used) >= limit {
		return ErrFull
	}
	v.used[d] = exp
	return nil
}

func replayed() error {
	return &controller.TicketError{Reason: controller.ReasonReplayed, Detail: "this ticket was already used: tickets open one session; get a new one from the controller"}
}

// Outstanding returns how many used tickets are remembered.
func (v *Verifier) Outstanding() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.used)
}
