package respapi

import "github.com/tidwall/redcon"

// replies is where a connection's replies are written until they go out, in one write
// per batch of commands read together (a whole pipeline's replies in one syscall).
// The encoding is redcon's.
type replies struct{ b []byte }

func (r *replies) WriteArray(n int)         { r.b = redcon.AppendArray(r.b, n) }
func (r *replies) WriteInt(n int)           { r.b = redcon.AppendInt(r.b, int64(n)) }
func (r *replies) WriteInt64(n int64)       { r.b = redcon.AppendInt(r.b, n) }
func (r *replies) WriteBulk(b []byte)       { r.b = redcon.AppendBulk(r.b, b) }
func (r *replies) WriteBulkString(s string) { r.b = redcon.AppendBulkString(r.b, s) }
func (r *replies) WriteString(s string)     { r.b = redcon.AppendString(r.b, s) }
func (r *replies) WriteError(msg string)    { r.b = redcon.AppendError(r.b, msg) }
func (r *replies) WriteNull()               { r.b = redcon.AppendNull(r.b) }
func (r *replies) pending() bool            { return len(r.b) > 0 }
func (r *replies) take() []byte             { b := r.b; r.b = r.b[:0]; return b }
