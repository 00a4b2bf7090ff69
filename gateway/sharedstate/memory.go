package sharedstate

import (
	"context"
	"crypto/sha256"
	"math"
	"sync"
	"time"
)

// Memory is a Store in one process: the single-replica default, and the
// state of a fleet of gateways in one process (tests). Expired records are
// swept as it goes. Its zero value is not usable: use NewMemory.
type Memory struct {
	// Now is the clock (tests inject one); nil: time.Now.
	Now func() time.Time

	mu       sync.Mutex
	tickets  map[[sha256.Size]byte]time.Time
	sessions map[string]map[string]string // caller -> session -> replica
	dials    map[string]*bucket
	replicas map[string]expiring
	owners   map[[sha256.Size]byte]expiring
	ops      int
}

type bucket struct {
	tokens float64
	at     time.Time
}

type expiring struct {
	v   string
	exp time.Time
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory {
	return &Memory{
		tickets:  map[[sha256.Size]byte]time.Time{},
		sessions: map[string]map[string]string{},
		dials:    map[string]*bucket{},
		replicas: map[string]expiring{},
		owners:   map[[sha256.Size]byte]expiring{},
	}
}

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// sweep drops expired records every 1024 operations (m.mu held):
// amortized O(1) per operation.
func (m *Memory) sweep(now time.Time) {
	if m.ops++; m.ops%1024 != 0 {
		return
	}
	for k, e := range m.tickets {
		if !e.After(now) {
			delete(m.tickets, k)
		}
	}
	for k, e := range m.owners {
		if !e.exp.After(now) {
			delete(m.owners, k)
		}
	}
	for k, e := range m.replicas {
		if !e.exp.After(now) {
			delete(m.replicas, k)
		}
	}
}

// UseTicket implements Store.
func (m *Memory) UseTicket(_ context.Context, d [sha256.Size]byte, exp time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sweep(now)
	if e, ok := m.tickets[d]; ok && e.After(now) {
		return ErrTicketUsed
	}
	m.tickets[d] = exp
	return nil
}

func (m *Memory) alive(replica string, now time.Time) bool {
	e, ok := m.replicas[replica]
	return ok && e.exp.After(now)
}

// AcquireSession implements Store.
func (m *Memory) AcquireSession(_ context.Context, caller, replica, session string, limit int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	s := m.sessions[caller]
	for id, r := range s {
		if !m.alive(r, now) {
			delete(s, id)
		}
	}
	if limit > 0 && len(s) >= limit {
		return &OverLimitError{Held: len(s), Limit: limit}
	}
	if s == nil {
		s = map[string]string{}
		m.sessions[caller] = s
	}
	s[session] = replica
	return nil
}

// ReleaseSession implements Store.
func (m *Memory) ReleaseSession(_ context.Context, caller, session string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.sessions[caller]; s != nil {
		delete(s, session)
		if len(s) == 0 {
			delete(m.sessions, caller)
		}
	}
	return nil
}

// TakeDial implements Store.
func (m *Memory) TakeDial(_ context.Context, caller string, rate float64, burst int) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	b := m.dials[caller]
	if b == nil {
		b = &bucket{tokens: float64(burst), at: now}
		m.dials[caller] = b
	}
	b.tokens = math.Min(float64(burst), b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
	if b.tokens < 1 {
		return time.Duration(math.Ceil((1 - b.tokens) / rate * float64(time.Second))), nil
	}
	b.tokens--
	if b.tokens >= float64(burst)-1 && len(m.dials) > 4096 {
		// Idle callers' full buckets are the default: forget them.
		for k, o := range m.dials {
			if o.tokens+now.Sub(o.at).Seconds()*rate >= float64(burst) {
				delete(m.dials, k)
			}
		}
	}
	return 0, nil
}

// Heartbeat implements Store.
func (m *Memory) Heartbeat(_ context.Context, replica, addr string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replicas[replica] = expiring{v: addr, exp: m.now().Add(ttl)}
	return nil
}

// Leave implements Store.
func (m *Memory) Leave(_ context.Context, replica string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.replicas, replica)
	return nil
}

// ReplicaAddr implements Store.
func (m *Memory) ReplicaAddr(_ context.Context, replica string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.replicas[replica]; ok && e.exp.After(m.now()) {
		return e.v, nil
	}
	return "", ErrNotFound
}

// PutResumeOwner implements Store.
func (m *Memory) PutResumeOwner(_ context.Context, key [sha256.Size]byte, replica string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sweep(now)
	m.owners[key] = expiring{v: replica, exp: now.Add(ttl)}
	return nil
}

// RefreshResumeOwners implements Store.
func (m *Memory) RefreshResumeOwners(_ context.Context, keys [][sha256.Size]byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for _, k := range keys {
		if e, ok := m.owners[k]; ok && e.exp.After(now) {
			e.exp = now.Add(ttl)
			m.owners[k] = e
		}
	}
	return nil
}

// ResumeOwner implements Store.
func (m *Memory) ResumeOwner(_ context.Context, key [sha256.Size]byte) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.owners[key]; ok && e.exp.After(m.now()) {
		return e.v, nil
	}
	return "", ErrNotFound
}

// DropResumeOwners implements Store.
func (m *Memory) DropResumeOwners(_ context.Context, keys [][sha256.Size]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.owners, k)
	}
	return nil
}

// Close implements Store.
func (m *Memory) Close() error { return nil }

var _ Store = (*Memory)(nil)
