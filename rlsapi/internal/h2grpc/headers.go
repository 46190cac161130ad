package h2grpc

// A call's request headers: what it needs read from them, and refusals for them.

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
)

// headerError is a call refused for its headers: the HTTP status and gRPC status it
// gets.
type headerError struct {
	http int
	code codes.Code
	msg  string
}

func (e *headerError) Error() string { return e.msg }

// checkHeaders reads what a call needs from its headers into st.
func (c *conn) checkHeaders(f *headerList, st *stream) error {
	switch {
	case f.truncated:
		return &headerError{431, codes.ResourceExhausted, fmt.Sprintf("header list over %d bytes", c.s.cfg.MaxHeaderBytes)}
	case f.PseudoValue("method") != "POST":
		return &headerError{405, codes.Internal, fmt.Sprintf("invalid gRPC request method %q", f.PseudoValue("method"))}
	case st.method == "":
		return &headerError{400, codes.Internal, "no :path"}
	}
	var contentType, encoding string
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "content-type":
			contentType = hf.Value
		case "authorization":
			st.auth = hf.Value
		case "grpc-encoding":
			encoding = hf.Value
		case "grpc-timeout":
			d, ok := parseTimeout(hf.Value)
			if !ok {
				return &headerError{400, codes.Internal, fmt.Sprintf("malformed grpc-timeout %q", hf.Value)}
			}
			st.timeout = max(d, 1)
		}
	}
	if !isGRPCContentType(contentType) {
		return &headerError{415, codes.Internal, fmt.Sprintf("invalid gRPC request content-type %q", contentType)}
	}
	if encoding != "" && encoding != "identity" {
		return nil // compressed calls go to Others, which knows the codecs
	}
	if h := c.s.cfg.Async[st.method]; h != nil {
		st.async = h
	} else {
		st.unary = c.s.cfg.Unary[st.method]
	}
	return nil
}

// malformed reports a request that RFC 9113 calls malformed (8.1.1), a stream error
// PROTOCOL_ERROR: a pseudo-header field missing or empty (8.3.1; CONNECT, which has no
// :scheme or :path, is left to be refused as not gRPC), or a connection-specific field
// (8.2.2: TE only as "trailers", which gRPC clients send).
func malformed(f *headerList) bool {
	if f.PseudoValue("method") == "" {
		return true
	}
	if f.PseudoValue("method") != "CONNECT" && (f.PseudoValue("scheme") == "" || f.PseudoValue("path") == "") {
		return true
	}
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
			return true
		case "te":
			if hf.Value != "trailers" {
				return true
			}
		}
	}
	return false
}

func isGRPCContentType(ct string) bool {
	const p = "application/grpc"
	return len(ct) >= len(p) && ct[:len(p)] == p && (len(ct) == len(p) || ct[len(p)] == '+' || ct[len(p)] == ';')
}

// refuse answers a call refused for its headers, and resets it if the client is
// still sending.
func (c *conn) refuse(st *stream, e *headerError, ended bool) {
	c.refuseNow(st, e, ended, false)
}

// refuseNow is refuse, and with now it never waits for queue room (writer.openNow).
func (c *conn) refuseNow(st *stream, e *headerError, ended, now bool) {
	block := appendStatusCode(nil, e.http)
	block = appendLiteral(block, "content-type", "application/grpc")
	block = appendStatusFields(block, e.code, e.msg)
	if !c.w.refusal(st, block, now) {
		return
	}
	if !ended {
		c.w.control(http2.FrameRSTStream, 0, st.id, binary.BigEndian.AppendUint32(nil, uint32(http2.ErrCodeNo)))
	}
}
