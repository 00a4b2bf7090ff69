package frame_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

var update = flag.Bool("update", false, "rewrite the golden files and seed corpora under testdata")

// kubeExecHeader is a typical header set of a Kubernetes exec stream: the
// stream type, the offered protocol versions and the client's user agent.
// Every name is one DecodeHeaderBlock knows.
func kubeExecHeader() http.Header {
	return http.Header{
		"Streamtype":                {"stdout"},
		"X-Stream-Protocol-Version": {"v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"},
		"User-Agent":                {"kubectl/v1.37.2 (linux/amd64) kubernetes/4e1c4b2"},
	}
}

// goldenHeaders are the header sets of headers.golden, in file order.
var goldenHeaders = []struct {
	name string
	h    http.Header
}{
	{"exec", kubeExecHeader()},
	{"exec-error", http.Header{"Streamtype": {"error"}}},
	{"exec-stdin", http.Header{"Streamtype": {"stdin"}}},
	{"exec-stdout", http.Header{"Streamtype": {"stdout"}}},
	{"exec-stderr", http.Header{"Streamtype": {"stderr"}}},
	{"exec-resize", http.Header{"Streamtype": {"resize"}}},
	{"portforward-data", http.Header{"Streamtype": {"data"}, "Port": {"8080"}, "Requestid": {"0"}}},
	{"portforward-error", http.Header{"Streamtype": {"error"}, "Port": {"8080"}, "Requestid": {"0"}}},
}

const goldenPath = "testdata/headers.golden"

func TestHeaderBlockGolden(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	var out strings.Builder
	out.WriteString("# WSMUX/1 header blocks (hex) of the streams of kubectl exec and port-forward.\n")
	out.WriteString("# Regenerate: go test ./frame/ -run TestHeaderBlockGolden -update\n")
	for _, g := range goldenHeaders {
		b, err := frame.AppendHeaderBlock(nil, g.h, &lim)
		require.NoError(t, err)
		fmt.Fprintf(&out, "%s %x\n", g.name, b)
	}
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(goldenPath), 0o755))
		require.NoError(t, os.WriteFile(goldenPath, []byte(out.String()), 0o644))
	}
	want, err := os.ReadFile(goldenPath)
	require.NoError(t, err, "run with -update to create it")
	require.Equal(t, string(want), out.String(), "AppendHeaderBlock output changed; run with -update if that is intended")

	// Every golden block decodes back to its header.
	sc := bufio.NewScanner(bytes.NewReader(want))
	i := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, hexBlock, ok := strings.Cut(line, " ")
		require.True(t, ok, line)
		require.Equal(t, goldenHeaders[i].name, name)
		block, err := hex.DecodeString(hexBlock)
		require.NoError(t, err)
		h := http.Header{}
		require.NoError(t, frame.DecodeHeaderBlock(block, &lim, h))
		require.Equal(t, goldenHeaders[i].h, h, name)
		i++
	}
	require.Equal(t, len(goldenHeaders), i)

	// The exec block, written by hand: sorted names, one field per value.
	b, err := frame.AppendHeaderBlock(nil, kubeExecHeader(), &lim)
	require.NoError(t, err)
	require.Equal(t, cat(
		rawField("streamtype", "stdout"),
		rawField("user-agent", "kubectl/v1.37.2 (linux/amd64) kubernetes/4e1c4b2"),
		rawField("x-stream-protocol-version", "v4.channel.k8s.io"),
		rawField("x-stream-protocol-version", "v3.channel.k8s.io"),
		rawField("x-stream-protocol-version", "v2.channel.k8s.io"),
		rawField("x-stream-protocol-version", "channel.k8s.io"),
	), b)
}

func TestDecodeHeaderBlockCanonical(t *testing.T) {
	cases := []struct{ wire, want string }{
		{"x-stream-protocol-version", "X-Stream-Protocol-Version"},
		{"streamtype", "Streamtype"},
		{"port", "Port"},
		{"requestid", "Requestid"},
		{"content-type", "Content-Type"},
		{"content-length", "Content-Length"},
		{"authorization", "Authorization"},
		{"user-agent", "User-Agent"},
		{"x-foo-bar", "X-Foo-Bar"},
		{"www-authenticate", "Www-Authenticate"},
		{"content-md5", "Content-Md5"},
		{"a", "A"},
		{"x--y", "X--Y"},
		{"-a", "-A"},
		{"a-", "A-"},
		{"1abc", "1abc"},
		{"1-abc", "1-Abc"},
		{"a_b", "A_b"},
		{"a.b", "A.b"},
		{"~!#$%&'*+-.^_`|", "~!#$%&'*+-.^_`|"},
		{strings.Repeat("z", 64), "Z" + strings.Repeat("z", 63)},
	}
	lim := frame.DefaultBlockLimits()
	for _, tc := range cases {
		h := http.Header{}
		require.NoError(t, frame.DecodeHeaderBlock(rawField(tc.wire, "v"), &lim, h), tc.wire)
		require.Equal(t, http.Header{tc.want: {"v"}}, h, tc.wire)
		require.Equal(t, textproto.CanonicalMIMEHeaderKey(tc.wire), tc.want, "net/textproto agrees on %q", tc.wire)
		require.Equal(t, "v", h.Get(tc.wire), "http.Header.Get(%q) finds it", tc.wire)
	}
}

func TestDecodeHeaderBlockRepeatedNames(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	block := cat(
		rawField("a", "1"), rawField("b", "x"), rawField("a", "2"), rawField("a", "3"),
		rawField("x-stream-protocol-version", "v4"), rawField("x-stream-protocol-version", "v3"),
		rawField("c", ""), rawField("c", ""), rawField("b", "y"),
	)
	h := http.Header{}
	require.NoError(t, frame.DecodeHeaderBlock(block, &lim, h))
	require.Equal(t, http.Header{
		"A":                         {"1", "2", "3"},
		"B":                         {"x", "y"},
		"C":                         {"", ""},
		"X-Stream-Protocol-Version": {"v4", "v3"},
	}, h)
	require.Equal(t, []string{"v4", "v3"}, h.Values("X-Stream-Protocol-Version"))
}

func TestDecodeHeaderBlockAdd(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	block := cat(rawField("streamtype", "stdout"), rawField("x-foo", "q"), rawField("new", "1"), rawField("x-foo", "r"))
	pre := func() http.Header {
		return http.Header{"Streamtype": {"pre"}, "X-Foo": {"p"}, "Other": {"o"}}
	}
	h := pre()
	require.NoError(t, frame.DecodeHeaderBlock(block, &lim, h))
	require.Equal(t, http.Header{
		"Streamtype": {"pre", "stdout"},
		"X-Foo":      {"p", "q", "r"},
		"New":        {"1"},
		"Other":      {"o"},
	}, h)

	// The same as http.Header.Add over the fields.
	ref := pre()
	var it frame.BlockIterator
	for it.Reset(block, &lim); it.Next(); {
		name, value := it.Field()
		ref.Add(string(name), string(value))
	}
	require.NoError(t, it.Err())
	require.Equal(t, ref, h)
}

func TestDecodeHeaderBlockUnchangedOnError(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	for _, bad := range [][]byte{
		cat(rawField("streamtype", "stdout"), rawField("x-new", "1"), rawField("bad", "\n")),
		cat(rawField("streamtype", "stdout"), rawField("Bad", "1")),
		cat(rawField("streamtype", "stdout"), []byte{5, 'a'}),
		fields(65),
	} {
		h := http.Header{"Streamtype": {"pre"}}
		require.Error(t, frame.DecodeHeaderBlock(bad, &lim, h))
		require.Equal(t, http.Header{"Streamtype": {"pre"}}, h)
		empty := http.Header{}
		require.Error(t, frame.DecodeHeaderBlock(bad, &lim, empty))
		require.Empty(t, empty)
	}
}

func TestDecodeHeaderBlockEmpty(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	h := http.Header{"A": {"1"}}
	require.NoError(t, frame.DecodeHeaderBlock(nil, &lim, h))
	require.NoError(t, frame.DecodeHeaderBlock([]byte{}, &lim, h))
	require.Equal(t, http.Header{"A": {"1"}}, h)
	require.NoError(t, frame.DecodeHeaderBlock(nil, &lim, nil), "an empty block needs no header")
}

// TestDecodeHeaderBlockSlicesIndependent checks that the value slices the
// decoder shares one backing array for do not overlap: appending to one name
// leaves the others alone.
func TestDecodeHeaderBlockSlicesIndependent(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	block := cat(rawField("a", "1"), rawField("a", "2"), rawField("b", "3"), rawField("c", "4"), rawField("c", "5"))
	h := http.Header{}
	require.NoError(t, frame.DecodeHeaderBlock(block, &lim, h))
	for _, k := range []string{"A", "B", "C"} {
		h.Add(k, "added")
	}
	require.Equal(t, http.Header{"A": {"1", "2", "added"}, "B": {"3", "added"}, "C": {"4", "5", "added"}}, h)
}

func TestAppendHeaderBlockSorted(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	h := http.Header{}
	for i := 20; i > 0; i-- {
		h[fmt.Sprintf("X-Name-%02d", i)] = []string{fmt.Sprint(i), "second"}
	}
	h["Empty"] = []string{} // no values: no field
	h["Streamtype"] = []string{"stdout"}
	first, err := frame.AppendHeaderBlock(nil, h, &lim)
	require.NoError(t, err)
	for range 50 { // map order differs from run to run
		b, err := frame.AppendHeaderBlock(nil, h, &lim)
		require.NoError(t, err)
		require.Equal(t, first, b)
	}
	var names []string
	var it frame.BlockIterator
	for it.Reset(first, &lim); it.Next(); {
		name, _ := it.Field()
		names = append(names, string(name))
	}
	require.NoError(t, it.Err())
	require.Len(t, names, 41)
	require.True(t, slices.IsSorted(names), "%q", names)
	require.Equal(t, "streamtype", names[0])
	require.NotContains(t, names, "empty")

	// Values of one name stay in order.
	got := http.Header{}
	require.NoError(t, frame.DecodeHeaderBlock(first, &lim, got))
	delete(h, "Empty")
	require.Equal(t, h, got)
}

// TestAppendHeaderBlockCaseVariants is the regression test for keys that
// only differ in case (set without Add): their order must not depend on map
// iteration order.
func TestAppendHeaderBlockCaseVariants(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	h := http.Header{"Foo": {"1"}, "foo": {"2"}, "FOO": {"3"}, "fOo": {"4"}, "Bar": {"b"}}
	want := cat(rawField("bar", "b"), rawField("foo", "3"), rawField("foo", "1"), rawField("foo", "4"), rawField("foo", "2"))
	for range 100 {
		b, err := frame.AppendHeaderBlock(nil, h, &lim)
		require.NoError(t, err)
		require.Equal(t, want, b)
	}
}

func TestAppendHeaderBlockKeepsDst(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	dst := []byte("prefix")
	b, err := frame.AppendHeaderBlock(dst, kubeExecHeader(), &lim)
	require.NoError(t, err)
	require.Equal(t, "prefix", string(b[:6]))
	require.NoError(t, frame.CheckHeaderBlock(b[6:], &lim))

	// On error nothing is appended, even after fields were written.
	h := kubeExecHeader()
	h["Zzz"] = []string{"\r"}
	dst = make([]byte, 6, 1024)
	copy(dst, "prefix")
	b, err = frame.AppendHeaderBlock(dst, h, &lim)
	require.Same(t, frame.ErrBlockBadValue, err)
	require.Equal(t, "prefix", string(b))

	b, err = frame.AppendHeaders(dst, 1, frame.FlagSYN, h, &lim)
	require.Same(t, frame.ErrBlockBadValue, err)
	require.Equal(t, "prefix", string(b))
}

func TestAppendHeadersLength(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	b, err := frame.AppendHeaders([]byte("xy"), 3, frame.FlagSYN, kubeExecHeader(), &lim)
	require.NoError(t, err)
	block, err := frame.AppendHeaderBlock(nil, kubeExecHeader(), &lim)
	require.NoError(t, err)
	require.Equal(t, cat([]byte("xy"), rawHeader(1, 2, uint16(len(block)), 3, 0), block), b)
}

func TestBlockIterator(t *testing.T) {
	lim := frame.DefaultBlockLimits()
	var it frame.BlockIterator
	require.False(t, it.Next(), "the zero BlockIterator holds no block")
	require.NoError(t, it.Err())

	block := cat(rawField("streamtype", "stdout"), rawField("a", ""), rawField("b-c", "x y"))
	it.Reset(block, &lim)
	var got []string
	for it.Next() {
		name, value := it.Field()
		got = append(got, string(name)+"="+string(value))
		if len(value) > 0 {
			require.True(t, &value[0] == &block[13], "value aliases the block")
		}
		break
	}
	for it.Next() {
		name, value := it.Field()
		got = append(got, string(name)+"="+string(value))
	}
	require.NoError(t, it.Err())
	require.Equal(t, []string{"streamtype=stdout", "a=", "b-c=x y"}, got)
	require.False(t, it.Next())

	// Reset clears an error and the field count.
	it.Reset([]byte{0}, &lim)
	require.False(t, it.Next())
	require.Same(t, frame.ErrBlockNameLength, it.Err())
	small := frame.BlockLimits{MaxBytes: 100, MaxFields: 1, MaxName: 8, MaxValue: 8}
	it.Reset(rawField("a", "1"), &small)
	require.True(t, it.Next())
	require.False(t, it.Next())
	require.NoError(t, it.Err())

	// The limits are copied at Reset.
	it.Reset(fields(2), &small)
	small.MaxFields = 2
	require.True(t, it.Next())
	require.False(t, it.Next())
	require.Same(t, frame.ErrBlockTooMany, it.Err())
}
