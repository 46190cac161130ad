package h2grpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerFrames is a HEADERS frame of stream 1 holding block, split into CONTINUATIONs
// after the sizes in cuts.
func headerFrames(t testing.TB, block []byte, cuts []int, endStream bool) []byte {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	first := block
	rest := []byte(nil)
	if len(cuts) > 0 && cuts[0] < len(block) {
		first, rest = block[:cuts[0]], block[cuts[0]:]
		cuts = cuts[1:]
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndHeaders: len(rest) == 0, EndStream: endStream}); err != nil {
		t.Fatal(err)
	}
	for len(rest) > 0 {
		n := len(rest)
		if len(cuts) > 0 && cuts[0] < n {
			n, cuts = cuts[0], cuts[1:]
		}
		if err := fr.WriteContinuation(1, n == len(rest), rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	return buf.Bytes()
}

// outcome is what reading a header list came to, comparable across the two readers.
type outcome struct {
	Fields    []hpack.HeaderField
	Truncated bool
	Err       string // the error's kind and code
}

func errKind(err error) string {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &se):
		return fmt.Sprintf("stream %v", se.Code)
	case errors.As(err, &ce):
		return fmt.Sprintf("connection %v", http2.ErrCode(ce))
	}
	return "other: " + err.Error()
}

func readWithMeta(wire []byte, max uint32) outcome {
	fr := http2.NewFramer(nil, bytes.NewReader(wire))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = max
	f, err := fr.ReadFrame()
	if err != nil {
		return outcome{Err: errKind(err)}
	}
	mh := f.(*http2.MetaHeadersFrame)
	return outcome{Fields: append([]hpack.HeaderField{}, mh.Fields...), Truncated: mh.Truncated}
}

func readWithList(h *headerList, wire []byte) outcome {
	fr := http2.NewFramer(nil, bytes.NewReader(wire))
	f, err := fr.ReadFrame()
	if err == nil {
		err = h.read(f.(*http2.HeadersFrame), fr)
	}
	if err != nil {
		return outcome{Err: errKind(err)}
	}
	return outcome{Fields: append([]hpack.HeaderField{}, h.fields...), Truncated: h.truncated}
}

// randomFields is a header list of the kinds a client may send, good and bad: pseudo
// fields known, unknown, twice or late; names upper case or not tokens; values with
// control bytes; "trailer" fields; sizes around the cap.
func randomFields(rng *rand.Rand) []hpack.HeaderField {
	pseudo := []string{":method", ":path", ":scheme", ":authority", ":protocol", ":status", ":bogus"}
	names := []string{"content-type", "te", "grpc-timeout", "authorization", "trailer", "x-a", "X-Upper", "bad name", "caf\xc3\xa9", ""}
	values := []string{"", "POST", "application/grpc", "1S", "a,b,c", "tab\there", "nul\x00", "del\x7f", "x"}
	var out []hpack.HeaderField
	for range rng.IntN(4) {
		out = append(out, hpack.HeaderField{Name: pseudo[rng.IntN(len(pseudo))], Value: values[rng.IntN(len(values))]})
	}
	for range rng.IntN(6) {
		hf := hpack.HeaderField{Name: names[rng.IntN(len(names))], Value: values[rng.IntN(len(values))]}
		if rng.IntN(8) == 0 {
			hf.Value = string(bytes.Repeat([]byte("v"), rng.IntN(300)))
		}
		if rng.IntN(10) == 0 {
			hf.Name = pseudo[rng.IntN(len(pseudo))] // a pseudo field after a regular one
		}
		out = append(out, hf)
	}
	return out
}

// headerList reads every header list as x/net's MetaHeadersFrame does: the same
// fields, the same truncation, the same errors (kind and code), for random lists, split
// at random into CONTINUATIONs, over one connection's decoder state, and for random
// bytes as HPACK.
func TestHeaderListReadsAsMetaHeadersFrame(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := range 3000 {
		limit := []uint32{64, 200, 16 << 10}[rng.IntN(3)]
		var block []byte
		if rng.IntN(10) == 0 {
			block = make([]byte, rng.IntN(40))
			for j := range block {
				block[j] = byte(rng.Uint32())
			}
		} else {
			var buf bytes.Buffer
			enc := hpack.NewEncoder(&buf) // a fresh table each time: both readers start fresh too
			for _, hf := range randomFields(rng) {
				hf.Sensitive = rng.IntN(4) == 0
				if err := enc.WriteField(hf); err != nil {
					t.Fatal(err)
				}
			}
			block = buf.Bytes()
		}
		var cuts []int
		for range rng.IntN(3) {
			cuts = append(cuts, 1+rng.IntN(max(1, len(block))))
		}
		wire := headerFrames(t, block, cuts, rng.IntN(2) == 0)
		want := readWithMeta(wire, limit)
		got := readWithList(newHeaderList(limit), wire)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("list %d (block %x, cuts %v, cap %d):\n got %+v\nwant %+v", i, block, cuts, limit, got, want)
		}
	}
}

// One connection's list is read frame after frame with the same decoder, as x/net's
// Framer reads them: the dynamic table carries from one to the next.
func TestHeaderListKeepsTheDynamicTable(t *testing.T) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	var wire []byte
	for i := range 3 {
		buf.Reset()
		enc.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
		enc.WriteField(hpack.HeaderField{Name: "x-call", Value: fmt.Sprint("same-", i%2)})
		wire = append(wire, headerFrames(t, buf.Bytes(), nil, true)...)
	}
	h := newHeaderList(16 << 10)
	fr := http2.NewFramer(nil, bytes.NewReader(wire))
	for i := range 3 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if err := h.read(f.(*http2.HeadersFrame), fr); err != nil {
			t.Fatal(err)
		}
		if got, want := h.RegularFields()[0].Value, fmt.Sprint("same-", i%2); got != want || h.PseudoValue("method") != "POST" {
			t.Fatalf("frame %d: x-call %q (want %q), :method %q", i, got, want, h.PseudoValue("method"))
		}
	}
}

// repeatReader reads b over and over.
type repeatReader struct {
	b   []byte
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.b[r.off:])
	r.off = (r.off + n) % len(r.b)
	return n, nil
}

var _ io.Reader = (*repeatReader)(nil)

// BenchmarkReadHeaders reads a gRPC call's HEADERS frame as a connection reads its
// calls after the first (grpc-go's fields indexed in the dynamic table, its timeout a
// literal each time) with the connection's headerList and with x/net's
// MetaHeadersFrame.
func BenchmarkReadHeaders(b *testing.B) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	encode := func() []byte {
		buf.Reset()
		for _, hf := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
			{Name: ":path", Value: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"}, {Name: ":authority", Value: "127.0.0.1:8081"},
			{Name: "content-type", Value: "application/grpc"}, {Name: "user-agent", Value: "grpc-go/1.85.0"}, {Name: "te", Value: "trailers"},
			{Name: "grpc-timeout", Value: "1999877u", Sensitive: true}} {
			enc.WriteField(hf)
		}
		return append([]byte(nil), buf.Bytes()...)
	}
	first := encode()
	wire := headerFrames(b, encode(), nil, false) // the fields of first, indexed
	prime := func(d *hpack.Decoder) {
		d.SetEmitEnabled(false)
		if _, err := d.Write(first); err != nil {
			b.Fatal(err)
		}
		d.SetEmitEnabled(true)
	}
	b.Run("headerList", func(b *testing.B) {
		fr := http2.NewFramer(nil, &repeatReader{b: wire})
		h := newHeaderList(16 << 10)
		prime(h.dec)
		b.ReportAllocs()
		for b.Loop() {
			f, err := fr.ReadFrame()
			if err == nil {
				err = h.read(f.(*http2.HeadersFrame), fr)
			}
			if err != nil || h.PseudoValue("method") != "POST" {
				b.Fatal(err, h.fields)
			}
		}
	})
	b.Run("MetaHeadersFrame", func(b *testing.B) {
		fr := http2.NewFramer(nil, &repeatReader{b: wire})
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		fr.MaxHeaderListSize = 16 << 10
		prime(fr.ReadMetaHeaders)
		b.ReportAllocs()
		for b.Loop() {
			f, err := fr.ReadFrame()
			if err != nil || f.(*http2.MetaHeadersFrame).PseudoValue("method") != "POST" {
				b.Fatal(err)
			}
		}
	})
}

// FuzzHeaderList compares headerList with MetaHeadersFrame on any bytes as HPACK,
// split once into a CONTINUATION.
func FuzzHeaderList(f *testing.F) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	enc.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
	enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	f.Add(buf.Bytes(), uint16(3), uint16(200))
	f.Add([]byte{0x82, 0x86, 0x84}, uint16(0), uint16(64))
	f.Fuzz(func(t *testing.T, block []byte, cut, limit uint16) {
		var cuts []int
		if cut > 0 {
			cuts = []int{int(cut)}
		}
		wire := headerFrames(t, block, cuts, true)
		want := readWithMeta(wire, uint32(limit)+1)
		got := readWithList(newHeaderList(uint32(limit)+1), wire)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("block %x, cut %d, cap %d:\n got %+v\nwant %+v", block, cut, limit+1, got, want)
		}
	})
}
