package controller

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Ticket format v1 (docs/spec/wsmux-ticket-v1.md):
//
//	ticket  = "wsmuxt1." payload "." mac
//	payload = base64url, unpadded, of the claims as canonical JSON
//	mac     = base64url, unpadded, of HMAC-SHA256(key, "wsmuxt1." payload)
const (
	// TicketPrefix starts every version 1 ticket; the gateway tells
	// tickets from other bearer tokens by it.
	TicketPrefix = "wsmuxt1."
	// MaxTicketLifetime bounds exp - iat, and how far in the future exp
	// may be when the gateway sees the ticket (plus ClockSkew).
	MaxTicketLifetime = 60 * time.Second
	// ClockSkew is how far the controller's clock may run ahead of the
	// gateway's (iat in the future).
	ClockSkew = 5 * time.Second
	// MinKeySize is the smallest HMAC key accepted, in bytes.
	MinKeySize = 32
	// MinNonceSize is the smallest nonce, in bytes before encoding.
	MinNonceSize = 16
	// MaxTicketSize bounds a ticket's length; longer ones are malformed.
	MaxTicketSize = 8 << 10
)

// Reasons a ticket is refused: TicketError.Reason, the label of the
// gateway's wsmux_auth_failures_total.
const (
	ReasonMalformed   = "ticket_malformed"    // not a v1 ticket, bad encoding, bad or missing claims
	ReasonBadMAC      = "ticket_bad_mac"      // signed with no key the gateway holds, or altered
	ReasonExpired     = "ticket_expired"      // now >= exp
	ReasonLifetime    = "ticket_lifetime"     // exp - iat over 60 s, iat in the future, exp too far ahead
	ReasonWrongTarget = "ticket_wrong_target" // another namespace, pod, subresource, container or command
	ReasonReplayed    = "ticket_replayed"     // already used
)

// TicketError is a refused ticket: Reason is one of the Reason constants.
type TicketError struct {
	Reason string
	Detail string
}

func (e *TicketError) Error() string { return "ticket refused (" + e.Reason + "): " + e.Detail }

func ticketErr(reason, format string, a ...any) error {
	return &TicketError{Reason: reason, Detail: fmt.Sprintf(format, a...)}
}

// Claims are what a ticket says: who (User, UID, Groups, as the cluster
// sees them through impersonation), the one target it opens, and when.
// Container and Command, when set, must match the request exactly; when
// empty, the request may name any.
type Claims struct {
	User        string   `json:"user"`
	UID         string   `json:"uid,omitempty"`
	Groups      []string `json:"groups,omitempty"`
	Namespace   string   `json:"namespace"`
	Pod         string   `json:"pod"`
	Subresource string   `json:"subresource"`
	Container   string   `json:"container,omitempty"`
	Command     []string `json:"command,omitempty"`
	// IssuedAt and Expires are Unix times in seconds.
	IssuedAt int64 `json:"iat"`
	Expires  int64 `json:"exp"`
	// Nonce is base64url (unpadded) of at least MinNonceSize random bytes.
	Nonce string `json:"nonce"`
}

// NewClaims returns the claims of a ticket for u to open t, valid from now
// for lifetime (at most MaxTicketLifetime), with a fresh random nonce.
func NewClaims(u User, t Target, now time.Time, lifetime time.Duration) (Claims, error) {
	if lifetime <= 0 || lifetime > MaxTicketLifetime {
		return Claims{}, fmt.Errorf("controller: ticket lifetime %s: want more than 0 and at most %s", lifetime, MaxTicketLifetime)
	}
	n := make([]byte, MinNonceSize)
	if _, err := io.ReadFull(rand.Reader, n); err != nil {
		return Claims{}, err
	}
	secs := int64((lifetime + time.Second - 1) / time.Second)
	c := Claims{
		User: u.Name, UID: u.UID, Groups: u.Groups,
		Namespace: t.Namespace, Pod: t.Pod, Subresource: t.Subresource, Container: t.Container, Command: t.Command,
		IssuedAt: now.Unix(), Expires: now.Unix() + secs, Nonce: base64.RawURLEncoding.EncodeToString(n),
	}
	return c, c.validate()
}

// MintTicket signs c with key (at least MinKeySize bytes). The same
// claims and key always give the same ticket (the vectors under
// testdata/tickets pin it).
func MintTicket(key []byte, c Claims) (string, error) {
	if len(key) < MinKeySize {
		return "", fmt.Errorf("controller: ticket key of %d bytes: want at least %d (for example: head -c 32 /dev/urandom | base64)", len(key), MinKeySize)
	}
	if err := c.validate(); err != nil {
		return "", err
	}
	signed := TicketPrefix + base64.RawURLEncoding.EncodeToString(c.canonicalJSON())
	return signed + "." + base64.RawURLEncoding.EncodeToString(ticketMAC(key, signed)), nil
}

func ticketMAC(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// IsTicket reports whether s looks like a ticket (its prefix).
func IsTicket(s string) bool { return strings.HasPrefix(s, TicketPrefix) }

// ParseTicket checks s's MAC against every key (in constant time each)
// and returns its claims and the SHA-256 digest of its payload (what the
// gateway remembers to refuse a replay, whichever key signed it). It does
// not look at the clock (Claims.CheckTime) or the request
// (Claims.CheckTarget). Errors are *TicketError.
func ParseTicket(keys [][]byte, s string) (Claims, [sha256.Size]byte, error) {
	var digest [sha256.Size]byte
	if len(s) > MaxTicketSize {
		return Claims{}, digest, ticketErr(ReasonMalformed, "%d bytes, more than %d", len(s), MaxTicketSize)
	}
	if !IsTicket(s) {
		return Claims{}, digest, ticketErr(ReasonMalformed, "not a version 1 ticket (want the prefix %q)", TicketPrefix)
	}
	payload, macText, ok := strings.Cut(s[len(TicketPrefix):], ".")
	signed := TicketPrefix + payload
	if !ok || payload == "" || strings.ContainsRune(macText, '.') {
		return Claims{}, digest, ticketErr(ReasonMalformed, "want three dot-separated parts")
	}
	mac, err := base64.RawURLEncoding.Strict().DecodeString(macText)
	if err != nil || len(mac) != sha256.Size {
		return Claims{}, digest, ticketErr(ReasonMalformed, "the MAC is not 32 bytes of unpadded base64url")
	}
	match := 0
	for _, k := range keys {
		match |= boolInt(hmac.Equal(mac, ticketMAC(k, signed)))
	}
	if match == 0 {
		return Claims{}, digest, ticketErr(ReasonBadMAC, "the MAC matches none of the gateway's keys (another key, or an altered ticket)")
	}
	js, err := base64.RawURLEncoding.Strict().DecodeString(payload)
	if err != nil {
		return Claims{}, digest, ticketErr(ReasonMalformed, "payload is not unpadded base64url")
	}
	digest = sha256.Sum256(js)
	var c Claims
	d := json.NewDecoder(strings.NewReader(string(js)))
	d.DisallowUnknownFields() // a claim this version does not know could be a restriction
	if err := d.Decode(&c); err != nil {
		return Claims{}, digest, ticketErr(ReasonMalformed, "claims: %v", err)
	}
	if d.More() {
		return Claims{}, digest, ticketErr(ReasonMalformed, "claims: data after the JSON object")
	}
	if err := c.validate(); err != nil {
		return Claims{}, digest, ticketErr(ReasonMalformed, "%v", err)
	}
	return c, digest, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CheckTime refuses an expired ticket (now at or after exp) and one whose
// times break the rules (exp - iat over MaxTicketLifetime, iat more than
// ClockSkew ahead of now, exp more than MaxTicketLifetime+ClockSkew ahead).
func (c Claims) CheckTime(now time.Time) error {
	n := now.Unix()
	switch {
	case c.Expires-c.IssuedAt > int64(MaxTicketLifetime/time.Second):
		return ticketErr(ReasonLifetime, "valid for %d s: at most %d", c.Expires-c.IssuedAt, int64(MaxTicketLifetime/time.Second))
	case c.IssuedAt > n+int64(ClockSkew/time.Second), c.Expires > n+int64((MaxTicketLifetime+ClockSkew)/time.Second):
		return ticketErr(ReasonLifetime, "issued in the future (iat %d, exp %d, now %d): check the controller's clock", c.IssuedAt, c.Expires, n)
	case n >= c.Expires:
		return ticketErr(ReasonExpired, "expired %d s ago: get a new ticket from the controller", n-c.Expires)
	}
	return nil
}

// CheckTarget refuses a request that is not for exactly the ticket's
// target: namespace, pod, subresource, and the container and command when
// the ticket names them.
func (c Claims) CheckTarget(t Target) error {
	want := c.Subresource + " of pod " + c.Namespace + "/" + c.Pod
	switch {
	case t.Namespace != c.Namespace || t.Pod != c.Pod || t.Subresource != c.Subresource:
		return ticketErr(ReasonWrongTarget, "the ticket is for %s, not %s of pod %s/%s", want, t.Subresource, t.Namespace, t.Pod)
	case c.Container != "" && t.Container != c.Container:
		return ticketErr(ReasonWrongTarget, "the ticket is for container %q of %s, not %q", c.Container, want, t.Container)
	case c.Command != nil && !slices.Equal(t.Command, c.Command):
		return ticketErr(ReasonWrongTarget, "the ticket is for the command %q, not %q", c.Command, t.Command)
	}
	return nil
}

// validate checks the claims a version 1 ticket must carry.
func (c Claims) validate() error {
	switch {
	case c.User == "":
		return errors.New("ticket claims: no user")
	case c.Namespace == "" || c.Pod == "":
		return errors.New("ticket claims: no namespace or pod")
	case c.Subresource != "exec" && c.Subresource != "attach" && c.Subresource != "portforward":
		return fmt.Errorf("ticket claims: subresource %q: want exec, attach or portforward", c.Subresource)
	case c.Command != nil && len(c.Command) == 0:
		return errors.New("ticket claims: an empty command (omit it to allow any)")
	case c.Command != nil && c.Subresource != "exec":
		return fmt.Errorf("ticket claims: a command for %s (only exec runs one)", c.Subresource)
	case c.IssuedAt <= 0 || c.Expires <= c.IssuedAt:
		return fmt.Errorf("ticket claims: iat %d, exp %d: want 0 < iat < exp", c.IssuedAt, c.Expires)
	}
	n, err := base64.RawURLEncoding.Strict().DecodeString(c.Nonce)
	if err != nil || len(n) < MinNonceSize {
		return fmt.Errorf("ticket claims: the nonce must be unpadded base64url of at least %d bytes", MinNonceSize)
	}
	for _, s := range slices.Concat([]string{c.User, c.UID, c.Namespace, c.Pod, c.Container}, c.Groups, c.Command) {
		if !utf8.ValidString(s) {
			return errors.New("ticket claims: a string is not valid UTF-8")
		}
	}
	return nil
}

// canonicalJSON is the claims' JSON as every minting helper writes it:
// keys sorted, empty optional claims left out, no spaces, and strings
// escaped as Python's json.dumps(ensure_ascii=True) escapes them (every
// character outside space..tilde escaped; \b \f \n \r \t short; others
// \u with four lower-case hex digits, UTF-16 surrogate pairs beyond the
// BMP).
func (c Claims) canonicalJSON() []byte {
	b := []byte{'{'}
	field := func(k string) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
	}
	list := func(k string, v []string) {
		field(k)
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		b = append(b, ']')
	}
	// In the order of their keys.
	if c.Command != nil {
		list("command", c.Command)
	}
	if c.Container != "" {
		field("container")
		b = appendJSONString(b, c.Container)
	}
	field("exp")
	b = strconv.AppendInt(b, c.Expires, 10)
	if len(c.Groups) > 0 {
		list("groups", c.Groups)
	}
	field("iat")
	b = strconv.AppendInt(b, c.IssuedAt, 10)
	for _, kv := range [][2]string{{"namespace", c.Namespace}, {"nonce", c.Nonce}, {"pod", c.Pod}, {"subresource", c.Subresource}} {
		field(kv[0])
		b = appendJSONString(b, kv[1])
	}
	if c.UID != "" {
		field("uid")
		b = appendJSONString(b, c.UID)
	}
	field("user")
	b = appendJSONString(b, c.User)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	u16 := func(r rune) {
		b = append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
	}
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r >= 0x20 && r <= 0x7e:
			b = append(b, byte(r))
		case r > 0xffff:
			r -= 0x10000
			u16(0xd800 + r>>10)
			u16(0xdc00 + r&0x3ff)
		default:
			u16(r)
		}
	}
	return append(b, '"')
}
