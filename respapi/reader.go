package respapi

import "bytes"

// Errors of commands the guard frames but that are not commands.
var (
	errEmptyMultibulk   = &protocolError{"invalid multibulk length"} // "*0" or "*-1"
	errUnbalancedQuotes = &protocolError{"unbalanced quotes in request"}
)

// nextCommand reads the command at the start of b, which the guard has framed: b holds
// it whole. It appends the command's arguments to args (views into b, or for a quoted
// inline argument a new slice) and returns them with the bytes it took. An empty
// inline line is a command of no arguments, which the caller skips, as Redis does.
// It checks what it relies on rather than trusting the guard, so a disagreement
// between the two is a protocol error, never a panic.
func nextCommand(b []byte, args [][]byte) ([][]byte, int, error) {
	if len(b) > 0 && b[0] == '*' {
		return nextMultibulk(b, args)
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return args, 0, errInvalidMultibulk
	}
	line := b[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	args, err := splitInline(line, args)
	return args, nl + 1, err
}

// nextMultibulk reads "*<n>\r\n" and n "$<len>\r\n<data>\r\n" arguments.
func nextMultibulk(b []byte, args [][]byte) ([][]byte, int, error) {
	n, i, ok := headerNumber(b, 0)
	if !ok {
		return args, 0, errInvalidMultibulk
	}
	if n <= 0 {
		return args, i, errEmptyMultibulk
	}
	for ; n > 0; n-- {
		if i >= len(b) || b[i] != '$' {
			return args, 0, errInvalidBulk
		}
		size, j, ok := headerNumber(b, i)
		if !ok || size < 0 || int64(len(b)-j) < size+2 {
			return args, 0, errInvalidBulk
		}
		end := j + int(size)
		if b[end] != '\r' || b[end+1] != '\n' {
			return args, 0, errInvalidBulk
		}
		args = append(args, b[j:end:end])
		i = end + 2
	}
	return args, i, nil
}

// headerNumber reads the number of the "*<n>\r\n" or "$<n>\r\n" line at b[at:] and
// returns it with the offset after the line. Only "*-1" may be negative.
func headerNumber(b []byte, at int) (n int64, next int, ok bool) {
	i := at + 1
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		if n > (1<<62)/10 {
			return 0, 0, false
		}
		n = n*10 + int64(b[i]-'0')
	}
	if i == start || i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return 0, 0, false
	}
	if neg {
		n = -n
	}
	return n, i + 2, true
}

// splitInline splits an inline command line into arguments as Redis (and redcon) do:
// separated by spaces; an argument may be quoted with " or ', in which \n, \r, \t and
// \<any> are escapes, and a closing quote must end the argument.
func splitInline(line []byte, args [][]byte) ([][]byte, error) {
	for len(line) > 0 {
		switch line[0] {
		case ' ':
			line = line[1:]
		case '"', '\'':
			arg, rest, err := quotedArg(line)
			if err != nil {
				return args, err
			}
			args, line = append(args, arg), rest
		default:
			end := bytes.IndexAny(line, " \"'")
			if end < 0 {
				end = len(line)
			} else if line[end] != ' ' {
				return args, errUnbalancedQuotes // a quote inside an argument
			}
			args, line = append(args, line[:end:end]), line[end:]
		}
	}
	return args, nil
}

// quotedArg reads the quoted argument at the start of line and returns it with what
// follows it.
func quotedArg(line []byte) (arg, rest []byte, err error) {
	quote := line[0]
	arg = make([]byte, 0, len(line))
	for i := 1; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && i+1 < len(line):
			i++
			switch c = line[i]; c {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			}
		case c == '\\':
			return nil, nil, errUnbalancedQuotes
		case c == quote:
			rest = line[i+1:]
			if len(rest) > 0 && rest[0] != ' ' {
				return nil, nil, errUnbalancedQuotes
			}
			return arg, rest, nil
		}
		arg = append(arg, c)
	}
	return nil, nil, errUnbalancedQuotes
}
