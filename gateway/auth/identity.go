package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/wsmux/wsmux/controller"
)

// Token is one line of a token file.
type Token struct {
	Token string
	User  controller.User
}

// ParseTokens parses a token file in kube-apiserver's static token format,
//
//	token,user,uid,"group1,group2"
//
// (uid and groups optional; the groups field is one CSV field, quoted when
// it holds commas). A line with a token only (no comma) is accepted too,
// without an identity. Blank lines and lines starting with # are ignored.
// At least one token is required.
func ParseTokens(name string, b []byte) ([]Token, error) {
	var out []Token
	seen := map[[sha256.Size]byte]int{}
	lines := bytes.Split(b, []byte("\n"))
	for i, raw := range lines {
		l := strings.TrimSpace(string(raw))
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		r := csv.NewReader(strings.NewReader(l))
		r.FieldsPerRecord = -1
		r.TrimLeadingSpace = true
		rec, err := r.Read()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s:%d: %v: want TOKEN,USER[,UID[,\"GROUP1,GROUP2\"]]", name, i+1, err)
		}
		for j := range rec {
			rec[j] = strings.TrimSpace(rec[j])
		}
		if len(rec) == 0 || rec[0] == "" {
			return nil, fmt.Errorf("%s:%d: empty token: want TOKEN,USER[,UID[,\"GROUP1,GROUP2\"]]", name, i+1)
		}
		if len(rec) > 4 {
			return nil, fmt.Errorf("%s:%d: %d fields: want TOKEN,USER[,UID[,\"GROUP1,GROUP2\"]] (quote the groups)", name, i+1, len(rec))
		}
		tk := Token{Token: rec[0]}
		d := sha256.Sum256([]byte(rec[0]))
		if prev, dup := seen[d]; dup {
			return nil, fmt.Errorf("%s:%d: the same token as line %d: every token must be unique", name, i+1, prev)
		}
		seen[d] = i + 1
		if len(rec) > 1 {
			if rec[1] == "" {
				return nil, fmt.Errorf("%s:%d: empty user name", name, i+1)
			}
			tk.User.Name = rec[1]
		}
		if len(rec) > 2 {
			tk.User.UID = rec[2]
		}
		if len(rec) > 3 {
			for g := range strings.SplitSeq(rec[3], ",") {
				if g = strings.TrimSpace(g); g != "" {
					tk.User.Groups = append(tk.User.Groups, g)
				}
			}
		}
		out = append(out, tk)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no token in file", name)
	}
	return out, nil
}

// ReadTokenFile reads and parses a token file (see ParseTokens).
func ReadTokenFile(path string) ([]Token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTokens(path, b)
}

// NewWithUsers returns Credentials accepting the given tokens (with
// their users) and, when clientCAs is not nil, client certificates.
func NewWithUsers(tokens []Token, clientCAs *x509.CertPool) *Credentials {
	a := &Credentials{clientCAs: clientCAs}
	a.SetTokens(tokens)
	return a
}

// SetTokens replaces the accepted tokens atomically: requests already
// authenticated keep their identity, later ones see the new set.
func (a *Credentials) SetTokens(tokens []Token) {
	ts := &tokenSet{}
	for _, t := range tokens {
		ts.digests = append(ts.digests, sha256.Sum256([]byte(t.Token)))
		ts.users = append(ts.users, t.User)
	}
	a.tokens.Store(ts)
}

// TokenFileReloader keeps an Authenticator's tokens in step with a file:
// Reload re-reads it; a file that does not parse keeps the old tokens (and
// Reload says why).
type TokenFileReloader struct {
	Path string
	Auth *Credentials
	Log  *slog.Logger
	// OnReload, when set, is called after every reload with its outcome
	// (nil: the file's tokens are in place; else the previous ones stay).
	OnReload func(error)

	seen fileState
}

// Reload re-reads the file and installs its tokens.
func (r *TokenFileReloader) Reload() error {
	b, err := os.ReadFile(r.Path)
	var toks []Token
	if err == nil {
		r.seen.note(b)
		toks, err = ParseTokens(r.Path, b)
	}
	if err == nil {
		r.Auth.SetTokens(toks)
		if r.Log != nil {
			r.Log.Info("auth: token file loaded", "file", r.Path, "tokens", len(toks))
		}
	} else if r.Log != nil {
		r.Log.Error("auth: token file not reloaded; keeping the previous tokens: fix the file and save it again (or send SIGHUP)", "file", r.Path, "error", err)
	}
	if r.OnReload != nil {
		r.OnReload(err)
	}
	return err
}

// Watch reloads on SIGHUP and when the file's contents change (checked
// every interval) until stop is closed.
func (r *TokenFileReloader) Watch(stop <-chan struct{}, interval time.Duration) {
	watchLoop(stop, interval, func() bool { return r.seen.changed(r.Path) }, r.Reload)
}

// fileState remembers the contents last read from a file (a digest), so a
// watch reloads when they change, whatever the file system's timestamps
// say (an edit within one mtime tick, a Secret volume's symlink swap), and
// reads a broken file once, not at every check.
type fileState struct {
	sum  [sha256.Size]byte
	read bool
}

func (f *fileState) note(b []byte) { f.sum, f.read = sha256.Sum256(b), true }

// changed reports whether the file now holds something else than what was
// last read (a file that cannot be read now counts as unchanged: it may be
// in the middle of a replacement).
func (f *fileState) changed(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && (!f.read || sha256.Sum256(b) != f.sum)
}

func watchLoop(stop <-chan struct{}, interval time.Duration, changed func() bool, reload func() error) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-hup:
			_ = reload()
		case <-tick.C:
			if changed() {
				_ = reload()
			}
		}
	}
}

// FileReloader keeps something in step with a file: Reload reads it and
// passes its bytes to Load; an error keeps the previous state (Load must
// not install anything then) and is logged.
type FileReloader struct {
	Path string
	What string // for the log: "policy file"
	Load func([]byte) error
	Log  *slog.Logger
	// OnReload, when set, is called after every reload with its outcome.
	OnReload func(error)

	seen fileState
}

// Reload re-reads the file.
func (r *FileReloader) Reload() error {
	b, err := os.ReadFile(r.Path)
	if err == nil {
		r.seen.note(b)
		err = r.Load(b)
	}
	if err != nil {
		if r.Log != nil {
			r.Log.Error("auth: "+r.What+" not reloaded; keeping the previous one: fix the file and save it again (or send SIGHUP)", "file", r.Path, "error", err)
		}
	} else if r.Log != nil {
		r.Log.Info("auth: "+r.What+" loaded", "file", r.Path)
	}
	if r.OnReload != nil {
		r.OnReload(err)
	}
	return err
}

// Watch reloads on SIGHUP and when the file's contents change until stop
// is closed.
func (r *FileReloader) Watch(stop <-chan struct{}, interval time.Duration) {
	watchLoop(stop, interval, func() bool { return r.seen.changed(r.Path) }, r.Reload)
}
