package respapi

import (
	"bytes"
	"crypto/subtle"
	"strconv"
)

func (s *Server) ping(c *client, args [][]byte) error {
	switch len(args) {
	case 1:
		c.out.WriteString("PONG")
	case 2:
		c.out.WriteBulk(args[1])
	default:
		return wrongArity("ping")
	}
	return nil
}

// echo answers ECHO message; redis-cli --pipe sends one to learn that all its replies came.
func (s *Server) echo(c *client, args [][]byte) error {
	c.out.WriteBulk(args[1])
	return nil
}

func (s *Server) quit(c *client, _ [][]byte) error {
	c.out.WriteString("OK")
	c.quit = true
	return nil
}

// auth answers AUTH password and AUTH username password. Any username is taken: the
// server has one secret, not users.
func (s *Server) auth(c *client, args [][]byte) error {
	if len(args) > 3 {
		return errorf("ERR", "syntax error")
	}
	if s.cfg.Token == "" {
		if len(args) == 3 {
			c.out.WriteString("OK") // like Redis's default user without a password
			return nil
		}
		return errorf("ERR", "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	}
	if err := s.checkToken(c, args[len(args)-1]); err != nil {
		return err
	}
	c.out.WriteString("OK")
	return nil
}

// checkToken checks a guess of the token and authenticates the connection if it is
// right; a right guess is never refused. A wrong one spends the client's source's
// budget of wrong guesses; past it, the connection is answered and closed.
func (s *Server) checkToken(c *client, guess []byte) error {
	// Constant time, so the reply's timing does not tell how much of a guess was right.
	if subtle.ConstantTimeCompare(guess, []byte(s.cfg.Token)) == 1 {
		c.authed = true
		c.authBy.Store(0)
		return nil
	}
	if ok, _ := s.limiter.Wrong(c.source); !ok {
		c.quit = true // answered, then closed
		s.metrics.dropped[dropAuthLimited].Inc()
		return errAuthLimited
	}
	return errWrongPass
}

// hello answers HELLO [protover [AUTH username password] [SETNAME name]] as Redis 7
// does, for protocol 2 only: clients that ask for 3 get NOPROTO and fall back to 2.
func (s *Server) hello(c *client, args [][]byte) error {
	if len(args) > 1 {
		ver, err := strconv.Atoi(string(args[1]))
		if err != nil {
			return errorf("ERR", "Protocol version is not an integer or out of range")
		}
		if ver != 2 {
			return errNoProto
		}
	}
	var password []byte
	for i := 2; i < len(args); i++ {
		switch {
		case bytes.EqualFold(args[i], []byte("AUTH")) && i+2 < len(args):
			password = args[i+2]
			i += 2
		case bytes.EqualFold(args[i], []byte("SETNAME")) && i+1 < len(args):
			i++ // names are accepted and not kept
		default:
			return errorf("ERR", "Syntax error in HELLO option '%s'", args[i])
		}
	}
	if password != nil && s.cfg.Token != "" {
		if err := s.checkToken(c, password); err != nil {
			return err
		}
	}
	if !c.authed {
		return errorf("NOAUTH", "HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	}
	s.writeHello(c)
	return nil
}

func (s *Server) writeHello(c *client) {
	w := &c.out
	w.WriteArray(14)
	w.WriteBulkString("server")
	w.WriteBulkString("redis")
	w.WriteBulkString("version")
	w.WriteBulkString(redisVersion)
	w.WriteBulkString("proto")
	w.WriteInt(2)
	w.WriteBulkString("id")
	w.WriteInt64(c.id)
	w.WriteBulkString("mode")
	w.WriteBulkString("standalone")
	w.WriteBulkString("role")
	w.WriteBulkString("master")
	w.WriteBulkString("modules")
	w.WriteArray(0)
}

// selectDB takes SELECT 0 only: there is one keyspace.
func (s *Server) selectDB(c *client, args [][]byte) error {
	db, err := strconv.Atoi(string(args[1]))
	if err != nil {
		return errNotInteger
	}
	if db != 0 {
		return errorf("ERR", "DB index is out of range")
	}
	c.out.WriteString("OK")
	return nil
}

// clientCmd accepts CLIENT SETNAME and CLIENT SETINFO, which client libraries send
// when they connect, and forgets what they set.
func (s *Server) clientCmd(c *client, args [][]byte) error {
	sub := args[1]
	switch {
	case bytes.EqualFold(sub, []byte("SETNAME")) && len(args) == 3,
		bytes.EqualFold(sub, []byte("SETINFO")) && len(args) == 4:
		c.out.WriteString("OK")
		return nil
	}
	return errorf("ERR", "unknown subcommand or wrong number of arguments for '%s'. Try CLIENT HELP.", sub)
}
