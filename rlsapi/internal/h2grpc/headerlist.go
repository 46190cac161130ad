package h2grpc

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerList is a HEADERS frame (and its CONTINUATIONs) with its header list decoded.
// The connection keeps one and decodes every frame's list into it, its fields reused:
// x/net's MetaHeadersFrame (Framer.ReadMetaHeaders) allocated the list, the frame and
// its decoding closure's state anew for every call, half of a call's allocations
// (BenchmarkReadHeaders). It checks what MetaHeadersFrame checks (RFC 9113, 8.2 and
// 8.3), with the same errors: a field name or value that is not valid, a pseudo-header
// after a regular one, unknown or twice, makes a stream error; a list past
// MaxHeaderBytes is Truncated; HPACK that does not decode ends the connection.
type headerList struct {
	streamID    uint32
	endStream   bool
	hasPriority bool
	priority    http2.PriorityParam

	fields    []hpack.HeaderField
	truncated bool // the list was over the size cap: fields holds its first part

	dec        *hpack.Decoder
	max        uint32 // the header list's size cap
	headers    uint32 // what is left of the cap for fields...
	trailers   uint32 // ...and for "trailer" fields' names, counted apart as x/net does
	sawRegular bool
	invalid    error
}

func newHeaderList(max uint32) *headerList {
	h := &headerList{max: max}
	h.dec = hpack.NewDecoder(4096, h.emit)
	return h
}

// StreamID and the rest answer as MetaHeadersFrame's do.
func (h *headerList) StreamID() uint32              { return h.streamID }
func (h *headerList) StreamEnded() bool             { return h.endStream }
func (h *headerList) HasPriority() bool             { return h.hasPriority }
func (h *headerList) Priority() http2.PriorityParam { return h.priority }

// PseudoValue is the value of pseudo-header field ":"+name, "" when absent.
func (h *headerList) PseudoValue(name string) string {
	for _, hf := range h.fields {
		if !hf.IsPseudo() {
			return ""
		}
		if hf.Name[1:] == name {
			return hf.Value
		}
	}
	return ""
}

// RegularFields is the list without its pseudo-header fields, which come first.
func (h *headerList) RegularFields() []hpack.HeaderField {
	for i, hf := range h.fields {
		if !hf.IsPseudo() {
			return h.fields[i:]
		}
	}
	return nil
}

// read decodes f's header list, reading its CONTINUATION frames from fr (the Framer
// checks that nothing else comes between them). An error is the connection's or the
// stream's (http2.ConnectionError, http2.StreamError).
func (h *headerList) read(f *http2.HeadersFrame, fr *http2.Framer) error {
	h.streamID, h.endStream = f.StreamID, f.StreamEnded()
	h.hasPriority, h.priority = f.HasPriority(), f.Priority
	h.fields, h.truncated = h.fields[:0], false
	h.headers, h.trailers, h.sawRegular, h.invalid = h.max, h.max, false, nil
	h.dec.SetEmitEnabled(true)
	h.dec.SetMaxStringLength(int(h.max))
	frag, ended := f.HeaderBlockFragment(), f.HeadersEnded()
	for {
		// A fragment far over what is left of the cap is not decoded, and a
		// CONTINUATION after a field that was not valid is not either: MetaHeadersFrame
		// stops counting sizes there too.
		if int64(len(frag)) > 2*int64(h.headers+h.trailers) || h.invalid != nil {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if _, err := h.dec.Write(frag); err != nil {
			return http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		next, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		c, ok := next.(*http2.ContinuationFrame)
		if !ok { // the Framer lets nothing else through: kept for safety
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		frag, ended = c.HeaderBlockFragment(), c.HeadersEnded()
	}
	if err := h.dec.Close(); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	if h.invalid == nil {
		h.invalid = h.checkPseudos()
	}
	if h.invalid != nil {
		return http2.StreamError{StreamID: h.streamID, Code: http2.ErrCodeProtocol, Cause: h.invalid}
	}
	return nil
}

// emit takes one decoded field.
func (h *headerList) emit(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		h.invalid = fmt.Errorf("invalid header field value for %q", hf.Name) // not the value: it may be secret
	}
	if hf.IsPseudo() {
		if h.sawRegular {
			h.invalid = errors.New("pseudo header field after regular")
		}
	} else {
		h.sawRegular = true
		if !validFieldName(hf.Name) {
			h.invalid = fmt.Errorf("invalid header field name %q", hf.Name)
		}
	}
	if h.invalid != nil {
		h.dec.SetEmitEnabled(false)
		return
	}
	left, size := &h.headers, hf.Size()
	if hf.Name == "trailer" {
		n := uint32(strings.Count(hf.Value, ",") + 1)
		left, size = &h.trailers, uint32(len(hf.Value))-n+1+n*hpack.HeaderField{}.Size()
	}
	if size > *left {
		h.dec.SetEmitEnabled(false)
		h.truncated, h.headers, h.trailers = true, 0, 0
		return
	}
	*left -= size
	h.fields = append(h.fields, hf)
}

// checkPseudos refuses an unknown pseudo-header field, one sent twice, and a list with
// both a request's and a response's.
func (h *headerList) checkPseudos() error {
	var request, response bool
	for i, hf := range h.fields {
		if !hf.IsPseudo() {
			break
		}
		switch hf.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			request = true
		case ":status":
			response = true
		default:
			return fmt.Errorf("invalid pseudo-header %q", hf.Name)
		}
		for _, seen := range h.fields[:i] {
			if seen.Name == hf.Name {
				return fmt.Errorf("duplicate pseudo-header %q", hf.Name)
			}
		}
	}
	if request && response {
		return errors.New("mix of request and response pseudo headers")
	}
	return nil
}

// validFieldName reports whether v may name a field on the wire: tokens, lower case.
func validFieldName(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !httpguts.IsTokenRune(rune(c)) || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}
