package controller

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/tickets/v1.json from the cases in this file")

const vectorFile = "../testdata/tickets/v1.json"

// vectors is testdata/tickets/v1.json: shared by this package and the
// Python helper (examples/controller-python), which must mint the same
// tickets from the same claims.
type vectors struct {
	Comment string            `json:"comment"`
	Version int               `json:"version"`
	Keys    map[string]string `json:"keys"` // name -> standard base64
	Mint    []mintVector      `json:"mint"`
	Verify  []verifyVector    `json:"verify"`
}

type mintVector struct {
	Name   string `json:"name"`
	Key    string `json:"key"`
	Claims Claims `json:"claims"`
	Ticket string `json:"ticket"`
}

type verifyVector struct {
	Name    string   `json:"name"`
	Keys    []string `json:"keys"` // the gateway's keys
	Now     int64    `json:"now"`
	Ticket  string   `json:"ticket"`
	Request Target   `json:"request"`
	Result  string   `json:"result"` // "ok" or a Reason
}

func vectorKey(name string) []byte {
	k := sha256.Sum256([]byte("wsmux ticket test vector key " + name))
	return k[:]
}

// signRaw signs any payload, for malformed claims with a valid MAC.
func signRaw(key []byte, js string) string {
	signed := TicketPrefix + base64.RawURLEncoding.EncodeToString([]byte(js))
	return signed + "." + base64.RawURLEncoding.EncodeToString(ticketMAC(key, signed))
}

const (
	t0    = 1767225600 // 2026-01-01T00:00:00Z
	nonce = "AAECAwQFBgcICQoLDA0ODw"
)

func buildVectors(t *testing.T) vectors {
	base := Claims{User: "alice", Namespace: "default", Pod: "web-0", Subresource: "exec", IssuedAt: t0, Expires: t0 + 30, Nonce: nonce}
	full := base
	full.UID, full.Groups, full.Container = "1001", []string{"dev", "oncall"}, "app"
	full.Command = []string{"sh", "-c", "echo \"<a&b>\" \\ \t\n\b\f\x01\x7f é ☃ 😀 \u2028"}
	full.Nonce = "ZXhhbXBsZSBub25jZSBieXRlcyAxMjM0NQ"
	pf := Claims{User: "ci-deployer", Groups: []string{"ci"}, Namespace: "shop", Pod: "db-0", Subresource: "portforward", IssuedAt: t0 + 7, Expires: t0 + 67, Nonce: nonce}
	uni := Claims{User: "zoë", Groups: []string{"ops/ü"}, Namespace: "default", Pod: "web-0", Subresource: "attach", Container: "app", IssuedAt: t0, Expires: t0 + 1, Nonce: nonce}
	long := base
	long.Expires = t0 + 61
	v := vectors{
		Comment: "wsmux ticket format v1 (docs/spec/wsmux-ticket-v1.md). keys: name -> standard base64 of the HMAC key. " +
			"mint: every minting helper must produce exactly ticket from key and claims. verify: what a gateway holding keys " +
			"decides at time now (Unix seconds) for a request for the target request: ok or the refusal reason.",
		Version: 1, Keys: map[string]string{},
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		v.Keys[k] = base64.StdEncoding.EncodeToString(vectorKey(k))
	}
	mint := func(name, key string, c Claims) string {
		tk, err := MintTicket(vectorKey(key), c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v.Mint = append(v.Mint, mintVector{Name: name, Key: key, Claims: c, Ticket: tk})
		return tk
	}
	tBase := mint("exec, fewest claims", "k1", base)
	tFull := mint("exec with uid, groups, container and a command needing every escape", "k1", full)
	tPF := mint("portforward", "k2", pf)
	tUni := mint("attach, non-ASCII user and group", "k1", uni)
	tLong := mint("valid for 61 s (minted; a gateway refuses it)", "k1", long)

	req := Target{Namespace: "default", Pod: "web-0", Subresource: "exec"}
	fullReq := Target{Namespace: "default", Pod: "web-0", Subresource: "exec", Container: "app", Command: full.Command}
	add := func(name string, keys []string, now int64, tk string, r Target, result string) {
		v.Verify = append(v.Verify, verifyVector{Name: name, Keys: keys, Now: now, Ticket: tk, Request: r, Result: result})
	}
	both := []string{"k1", "k2"}
	add("valid", both, t0+10, tBase, req, "ok")
	add("valid, any command when the ticket names none", both, t0+10, tBase, Target{Namespace: "default", Pod: "web-0", Subresource: "exec", Container: "x", Command: []string{"sh"}}, "ok")
	add("valid, with every claim", both, t0+10, tFull, fullReq, "ok")
	add("valid, signed with the second key (rollover)", both, t0+10, tPF, Target{Namespace: "shop", Pod: "db-0", Subresource: "portforward"}, "ok")
	add("valid until the second before exp", both, t0, tUni, Target{Namespace: "default", Pod: "web-0", Subresource: "attach", Container: "app"}, "ok")
	add("controller clock 5 s ahead", both, t0+2, tPF, Target{Namespace: "shop", Pod: "db-0", Subresource: "portforward"}, "ok")
	add("expired: now == exp", both, t0+30, tBase, req, ReasonExpired)
	add("expired long ago", both, t0+3600, tBase, req, ReasonExpired)
	add("lifetime over 60 s", both, t0+10, tLong, req, ReasonLifetime)
	add("issued more than 5 s in the future", both, t0+1, tPF, Target{Namespace: "shop", Pod: "db-0", Subresource: "portforward"}, ReasonLifetime)
	add("key no longer held (rolled over)", []string{"k1"}, t0+10, tPF, Target{Namespace: "shop", Pod: "db-0", Subresource: "portforward"}, ReasonBadMAC)
	add("signed with an unknown key", both, t0+10, mintWith(t, "k3", base), req, ReasonBadMAC)
	add("payload altered", both, t0+10, alter(tBase, len(TicketPrefix)+3), req, ReasonBadMAC)
	add("MAC altered", both, t0+10, alter(tBase, len(tBase)-5), req, ReasonBadMAC)
	add("another pod", both, t0+10, tBase, Target{Namespace: "default", Pod: "web-1", Subresource: "exec"}, ReasonWrongTarget)
	add("another namespace", both, t0+10, tBase, Target{Namespace: "kube-system", Pod: "web-0", Subresource: "exec"}, ReasonWrongTarget)
	add("another subresource", both, t0+10, tBase, Target{Namespace: "default", Pod: "web-0", Subresource: "attach"}, ReasonWrongTarget)
	add("another container", both, t0+10, tFull, Target{Namespace: "default", Pod: "web-0", Subresource: "exec", Container: "sidecar", Command: full.Command}, ReasonWrongTarget)
	add("another command", both, t0+10, tFull, Target{Namespace: "default", Pod: "web-0", Subresource: "exec", Container: "app", Command: []string{"sh"}}, ReasonWrongTarget)
	add("a command argument more", both, t0+10, tFull, Target{Namespace: "default", Pod: "web-0", Subresource: "exec", Container: "app", Command: append(append([]string{}, full.Command...), "x")}, ReasonWrongTarget)
	add("another version prefix", both, t0+10, "wsmuxt2."+strings.TrimPrefix(tBase, TicketPrefix), req, ReasonMalformed)
	add("no MAC", both, t0+10, tBase[:strings.LastIndexByte(tBase, '.')], req, ReasonMalformed)
	add("padded MAC", both, t0+10, tBase+"=", req, ReasonMalformed)
	add("an unknown claim", both, t0+10, signRaw(vectorKey("k1"), `{"exp":1767225630,"iat":1767225600,"namespace":"default","nonce":"`+nonce+`","pod":"web-0","readonly":true,"subresource":"exec","user":"alice"}`), req, ReasonMalformed)
	add("no user", both, t0+10, signRaw(vectorKey("k1"), `{"exp":1767225630,"iat":1767225600,"namespace":"default","nonce":"`+nonce+`","pod":"web-0","subresource":"exec"}`), req, ReasonMalformed)
	add("short nonce", both, t0+10, signRaw(vectorKey("k1"), `{"exp":1767225630,"iat":1767225600,"namespace":"default","nonce":"AAECAwQFBgcICQoLDA0O","pod":"web-0","subresource":"exec","user":"alice"}`), req, ReasonMalformed)
	add("empty command", both, t0+10, signRaw(vectorKey("k1"), `{"command":[],"exp":1767225630,"iat":1767225600,"namespace":"default","nonce":"`+nonce+`","pod":"web-0","subresource":"exec","user":"alice"}`), req, ReasonMalformed)
	add("not JSON", both, t0+10, signRaw(vectorKey("k1"), `exp=1767225630`), req, ReasonMalformed)
	return v
}

func mintWith(t *testing.T, key string, c Claims) string {
	tk, err := MintTicket(vectorKey(key), c)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// alter changes the base64url character at i to another one.
func alter(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatalf("%v (run go test ./controller -run TestTicketVectors -update to write it)", err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// verify is what the gateway decides, without the replay cache.
func verify(keys [][]byte, now time.Time, tk string, req Target) string {
	c, _, err := ParseTicket(keys, tk)
	if err == nil {
		err = c.CheckTime(now)
	}
	if err == nil {
		err = c.CheckTarget(req)
	}
	var te *TicketError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &te):
		return te.Reason
	}
	return "error: " + err.Error()
}

// TestTicketVectors: the committed vectors are what this code mints and
// decides (they would change only with a new version of the format).
func TestTicketVectors(t *testing.T) {
	if *update {
		b, _ := json.MarshalIndent(buildVectors(t), "", "  ")
		if err := os.MkdirAll(filepath.Dir(vectorFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v := loadVectors(t)
	if v.Version != 1 || len(v.Mint) < 4 || len(v.Verify) < 20 {
		t.Fatalf("version %d, %d mint and %d verify vectors", v.Version, len(v.Mint), len(v.Verify))
	}
	key := func(name string) []byte {
		k, err := base64.StdEncoding.DecodeString(v.Keys[name])
		if err != nil || len(k) < MinKeySize {
			t.Fatalf("key %q: %v", name, err)
		}
		return k
	}
	for _, m := range v.Mint {
		got, err := MintTicket(key(m.Key), m.Claims)
		if err != nil || got != m.Ticket {
			t.Errorf("mint %q:\n got %s %v\nwant %s", m.Name, got, err, m.Ticket)
		}
		c, _, err := ParseTicket([][]byte{key(m.Key)}, m.Ticket)
		if err != nil {
			t.Errorf("mint %q: parse: %v", m.Name, err)
		} else if a, b := c.canonicalJSON(), m.Claims.canonicalJSON(); string(a) != string(b) {
			t.Errorf("mint %q: round trip %s, want %s", m.Name, a, b)
		}
	}
	reasons := map[string]bool{}
	for _, vv := range v.Verify {
		var keys [][]byte
		for _, k := range vv.Keys {
			keys = append(keys, key(k))
		}
		if got := verify(keys, time.Unix(vv.Now, 0), vv.Ticket, vv.Request); got != vv.Result {
			t.Errorf("verify %q: %s, want %s", vv.Name, got, vv.Result)
		}
		reasons[vv.Result] = true
	}
	for _, r := range []string{"ok", ReasonMalformed, ReasonBadMAC, ReasonExpired, ReasonLifetime, ReasonWrongTarget} {
		if !reasons[r] {
			t.Errorf("no verify vector with result %s", r)
		}
	}
}

func TestCanonicalJSONIsJSON(t *testing.T) {
	for _, m := range buildVectors(t).Mint {
		js := m.Claims.canonicalJSON()
		var c Claims
		if err := json.Unmarshal(js, &c); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if strings.Join(c.Command, "\x00") != strings.Join(m.Claims.Command, "\x00") || c.User != m.Claims.User || strings.Join(c.Groups, ",") != strings.Join(m.Claims.Groups, ",") {
			t.Errorf("%s decodes to %+v", js, c)
		}
		for _, b := range js {
			if b < 0x20 || b > 0x7e {
				t.Errorf("%s: byte %#x outside printable ASCII", js, b)
			}
		}
	}
}

func TestMintRefuses(t *testing.T) {
	ok := Claims{User: "a", Namespace: "n", Pod: "p", Subresource: "exec", IssuedAt: t0, Expires: t0 + 10, Nonce: nonce}
	if _, err := MintTicket(make([]byte, 31), ok); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short key: %v", err)
	}
	for name, mod := range map[string]func(*Claims){
		"no user":         func(c *Claims) { c.User = "" },
		"bad subresource": func(c *Claims) { c.Subresource = "log" },
		"exp before iat":  func(c *Claims) { c.Expires = c.IssuedAt },
		"short nonce":     func(c *Claims) { c.Nonce = "AAAA" },
		"empty command":   func(c *Claims) { c.Command = []string{} },
		"attach command":  func(c *Claims) { c.Subresource, c.Command = "attach", []string{"sh"} },
		"invalid UTF-8":   func(c *Claims) { c.Pod = "\xff" },
	} {
		c := ok
		mod(&c)
		if _, err := MintTicket(make([]byte, 32), c); err == nil {
			t.Errorf("%s: minted", name)
		}
	}
}

func TestParseTicketTooLong(t *testing.T) {
	s := TicketPrefix + strings.Repeat("A", MaxTicketSize)
	if _, _, err := ParseTicket([][]byte{vectorKey("k1")}, s); err == nil || !strings.Contains(err.Error(), "more than 8192") {
		t.Fatalf("%d bytes: %v", len(s), err)
	}
}

func TestNewClaims(t *testing.T) {
	now := time.Unix(t0, 0)
	c, err := NewClaims(User{Name: "alice", Groups: []string{"dev"}}, Target{Namespace: "default", Pod: "web-0", Subresource: "exec", Command: []string{"ls"}}, now, 30*time.Second)
	if err != nil || c.Expires != t0+30 || c.IssuedAt != t0 || len(c.Nonce) != 22 || c.Command[0] != "ls" {
		t.Fatalf("%+v %v", c, err)
	}
	c2, _ := NewClaims(User{Name: "alice"}, Target{Namespace: "default", Pod: "web-0", Subresource: "exec"}, now, 30*time.Second)
	if c2.Nonce == c.Nonce {
		t.Error("the same nonce twice")
	}
	for _, d := range []time.Duration{0, 61 * time.Second} {
		if _, err := NewClaims(User{Name: "a"}, Target{Namespace: "n", Pod: "p", Subresource: "exec"}, now, d); err == nil {
			t.Errorf("lifetime %s accepted", d)
		}
	}
}

func FuzzParseTicket(f *testing.F) {
	b, err := os.ReadFile(vectorFile)
	if err != nil {
		f.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		f.Fatal(err)
	}
	for _, m := range v.Verify {
		f.Add(m.Ticket)
	}
	keys := [][]byte{vectorKey("k1"), vectorKey("k2")}
	f.Fuzz(func(t *testing.T, s string) {
		c, _, err := ParseTicket(keys, s)
		var te *TicketError
		switch {
		case err != nil && !errors.As(err, &te):
			t.Fatalf("%q: untyped error %v", s, err)
		case err == nil && c.validate() != nil:
			t.Fatalf("%q accepted with invalid claims %+v", s, c)
		}
	})
}
