package hotkeys

import "unsafe"

// unsafeString is a string sharing buf's bytes, as a zero-copy parser would make.
func unsafeString(buf []byte) string { return unsafe.String(&buf[0], len(buf)) }
