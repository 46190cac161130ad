package respapi

import (
	"errors"
	"fmt"
	"strings"

	"github.com/leapcount/leapcount/counter"
)

// replyError is a client's mistake answered in Redis's own words, error code
// included ("NOAUTH ...", "ERR wrong number of arguments ..."). It counts as bad
// input (counter.IsBadInput), like the validation errors of the counter package.
type replyError struct {
	code string // the first word of the reply: ERR, NOAUTH, WRONGPASS, NOPROTO
	msg  string
}

func (e *replyError) Error() string        { return e.msg }
func (e *replyError) Is(target error) bool { return target == counter.ErrBadArgument }

func errorf(code, format string, args ...any) error {
	return &replyError{code: code, msg: fmt.Sprintf(format, args...)}
}

func wrongArity(name string) error {
	return errorf("ERR", "wrong number of arguments for '%s' command", name)
}

func syntaxError(detail string) error {
	return errorf("ERR", "syntax error: %s", detail)
}

// unknownCommand words the reply as Redis 7 does, quoting the start of the arguments.
func unknownCommand(args [][]byte) error {
	var quoted strings.Builder
	for _, a := range args[1:] {
		if quoted.Len() >= 128 {
			break
		}
		fmt.Fprintf(&quoted, "'%.*s' ", 128-quoted.Len(), a)
	}
	return errorf("ERR", "unknown command '%.128s', with args beginning with: %s", args[0], quoted.String())
}

var (
	errNoAuth      = errorf("NOAUTH", "Authentication required.")
	errWrongPass   = errorf("WRONGPASS", "invalid username-password pair or user is disabled.")
	errNoProto     = errorf("NOPROTO", "unsupported protocol version")
	errNotInteger  = errorf("ERR", "value is not an integer or out of range")
	errAuthLimited = errorf("ERR", "too many failed AUTH attempts; retry later")
)

// replyText is the error reply for err, without the leading '-'. (redcon's AppendError,
// which replies use, turns line breaks from a client's arguments into spaces.)
func replyText(err error) string {
	var re *replyError
	if errors.As(err, &re) {
		return re.code + " " + err.Error()
	}
	return "ERR " + err.Error()
}
