package sharedstate

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultTimeout is RedisConfig.Timeout's default: the longest one call
// to the store may take (dial, write and read) before it fails.
const DefaultTimeout = 500 * time.Millisecond

// RedisConfig configures NewRedis.
type RedisConfig struct {
	// URL is redis://[user:password@]host:port[/db], or rediss:// for
	// TLS (go-redis's ParseURL; its query options apply).
	URL string
	// TLS, when set, is the TLS configuration of a rediss:// URL (a
	// private CA); nil: the system's roots and the URL's host.
	TLS *tls.Config
	// Prefix starts every key (default "wsmux:"): fleets sharing a Redis
	// use one each.
	Prefix string
	// Timeout bounds every call (default DefaultTimeout); no retries, so
	// a call fails within about Timeout and the gateway falls back at
	// once.
	Timeout time.Duration
}

// Redis is a Store in a Redis (or Valkey) server: one key per used
// ticket, per caller with sessions or dials, per live replica and per
// resumable session, each with an expiry. It needs a single server (or a
// primary behind Sentinel), not Redis Cluster: its scripts read keys they
// are not handed.
type Redis struct {
	c       *redis.Client
	prefix  string
	timeout time.Duration
}

// NewRedis connects to the server of cfg.URL lazily: a server that is down
// now makes calls fail, not NewRedis (Ping checks it).
func NewRedis(cfg RedisConfig) (*Redis, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
		return nil, fmt.Errorf("sharedstate: %q: want redis://[user:password@]host:port[/db] or rediss:// for TLS", redactURL(cfg.URL))
	}
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("sharedstate: %s: %v", redactURL(cfg.URL), err)
	}
	if cfg.TLS != nil && opt.TLSConfig != nil {
		t := cfg.TLS.Clone()
		if t.ServerName == "" {
			t.ServerName = opt.TLSConfig.ServerName
		}
		t.MinVersion = max(t.MinVersion, tls.VersionTLS12)
		opt.TLSConfig = t
	}
	r := &Redis{prefix: cfg.Prefix, timeout: cfg.Timeout}
	if r.prefix == "" {
		r.prefix = "wsmux:"
	}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = r.timeout, r.timeout, r.timeout
	opt.PoolTimeout = r.timeout
	opt.MaxRetries = -1 // no retries: the caller's fallback is faster than a retry
	opt.DialerRetries = 1
	opt.ContextTimeoutEnabled = true
	opt.DisableIdentity = true
	opt.Protocol = 2
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	r.c = redis.NewClient(opt)
	return r, nil
}

// quiet drops go-redis's own log lines (its pool's dial failures): the
// gateway logs the store's failures itself, once per outage.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// redactURL hides a password in u.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparseable URL)"
}

// bound gives ctx the store's timeout.
func (r *Redis) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.timeout)
}

// Ping checks that the server answers.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	return r.c.Ping(ctx).Err()
}

func (r *Redis) ticketKey(d [sha256.Size]byte) string {
	return r.prefix + "ticket:" + hex.EncodeToString(d[:])
}
func (r *Redis) replicaKey(id string) string { return r.prefix + "replica:" + id }
func (r *Redis) ownerKey(k [sha256.Size]byte) string {
	return r.prefix + "resume:" + hex.EncodeToString(k[:])
}

// UseTicket implements Store: SET NX with the ticket's expiry.
func (r *Redis) UseTicket(ctx context.Context, d [sha256.Size]byte, exp time.Time) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if !exp.After(time.Now()) {
		exp = time.Now().Add(time.Second) // expired meanwhile: remember it briefly anyway
	}
	err := r.c.SetArgs(ctx, r.ticketKey(d), "1", redis.SetArgs{Mode: "NX", ExpireAt: exp}).Err()
	if errors.Is(err, redis.Nil) {
		return ErrTicketUsed
	}
	return err
}

// sessionScript counts the caller's sessions on live replicas (dropping
// those of replicas whose heartbeat expired), refuses at the limit, else
// records the new one. KEYS[1]: the caller's hash (session -> replica);
// ARGV: session, replica, limit, the replica key prefix, the hash's TTL.
var sessionScript = redis.NewScript(`
local h = redis.call('HGETALL', KEYS[1])
local n = 0
for i = 1, #h, 2 do
  if redis.call('EXISTS', ARGV[4] .. h[i+1]) == 1 then n = n + 1 else redis.call('HDEL', KEYS[1], h[i]) end
end
local lim = tonumber(ARGV[3])
if lim > 0 and n >= lim then return n end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return -1
`)

// sessionsTTL bounds how long a caller's session hash outlives its last
// acquire: a safety net; sessions of dead replicas go by their heartbeat.
const sessionsTTL = 24 * time.Hour

// AcquireSession implements Store.
func (r *Redis) AcquireSession(ctx context.Context, caller, replica, session string, limit int) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	n, err := sessionScript.Run(ctx, r.c, []string{r.prefix + "sessions:" + callerKey(caller)},
		session, replica, limit, r.prefix+"replica:", sessionsTTL.Milliseconds()).Int()
	if err != nil {
		return err
	}
	if n >= 0 {
		return &OverLimitError{Held: n, Limit: limit}
	}
	return nil
}

// ReleaseSession implements Store.
func (r *Redis) ReleaseSession(ctx context.Context, caller, session string) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	return r.c.HDel(ctx, r.prefix+"sessions:"+callerKey(caller), session).Err()
}

// dialScript is a token bucket on the server's clock (replicas' clocks
// may differ). KEYS[1]: the caller's bucket; ARGV: rate, burst. Returns
// 0 (token taken) or the milliseconds until one is.
var dialScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local v = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(v[1])
local at = tonumber(v[2])
if tokens == nil or at == nil then tokens = burst; at = now end
tokens = math.min(burst, tokens + (now - at) / 1000 * rate)
if tokens < 1 then return math.max(1, math.ceil((1 - tokens) / rate * 1000)) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - 1), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return 0
`)

// TakeDial implements Store.
func (r *Redis) TakeDial(ctx context.Context, caller string, rate float64, burst int) (time.Duration, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	ms, err := dialScript.Run(ctx, r.c, []string{r.prefix + "dials:" + callerKey(caller)},
		strconv.FormatFloat(rate, 'g', -1, 64), burst).Int64()
	if err != nil {
		return 0, err
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Heartbeat implements Store.
func (r *Redis) Heartbeat(ctx context.Context, replica, addr string, ttl time.Duration) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	return r.c.Set(ctx, r.replicaKey(replica), addr, ttl).Err()
}

// Leave implements Store.
func (r *Redis) Leave(ctx context.Context, replica string) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	return r.c.Del(ctx, r.replicaKey(replica)).Err()
}

// ReplicaAddr implements Store.
func (r *Redis) ReplicaAddr(ctx context.Context, replica string) (string, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	return r.get(ctx, r.replicaKey(replica))
}

func (r *Redis) get(ctx context.Context, key string) (string, error) {
	v, err := r.c.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return "", ErrNotFound
	}
	return v, err
}

// PutResumeOwner implements Store.
func (r *Redis) PutResumeOwner(ctx context.Context, key [sha256.Size]byte, replica string, ttl time.Duration) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	return r.c.Set(ctx, r.ownerKey(key), replica, ttl).Err()
}

// RefreshResumeOwners implements Store (one pipeline).
func (r *Redis) RefreshResumeOwners(ctx context.Context, keys [][sha256.Size]byte, ttl time.Duration) error {
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.PExpire(ctx, r.ownerKey(k), ttl)
		}
		return nil
	})
	return err
}

// ResumeOwner implements Store.
func (r *Redis) ResumeOwner(ctx context.Context, key [sha256.Size]byte) (string, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	return r.get(ctx, r.ownerKey(key))
}

// DropResumeOwners implements Store.
func (r *Redis) DropResumeOwners(ctx context.Context, keys [][sha256.Size]byte) error {
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := r.bound(ctx)
	defer cancel()
	ks := make([]string, len(keys))
	for i, k := range keys {
		ks[i] = r.ownerKey(k)
	}
	return r.c.Del(ctx, ks...).Err()
}

// Close implements Store.
func (r *Redis) Close() error { return r.c.Close() }

var _ Store = (*Redis)(nil)
