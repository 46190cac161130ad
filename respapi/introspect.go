package respapi

import (
	"bytes"
	"strings"

	"github.com/leapcount/leapcount/counter"
)

// command answers COMMAND [COUNT | LIST | INFO name... | DOCS [name...]] as Redis 7
// does, describing every command this server knows. Cluster clients (go-redis,
// redis-py, Jedis, Lettuce) read each command's key positions from it: the SW.*
// commands have their one key at position 1.
func (s *Server) command(c *client, args [][]byte) error {
	if len(args) == 1 {
		c.out.WriteArray(len(commandList))
		for _, cmd := range commandList {
			writeCommandInfo(c, cmd)
		}
		return nil
	}
	switch sub := args[1]; {
	case bytes.EqualFold(sub, []byte("COUNT")) && len(args) == 2:
		c.out.WriteInt(len(commandList))
	case bytes.EqualFold(sub, []byte("LIST")) && len(args) == 2:
		c.out.WriteArray(len(commandList))
		for _, cmd := range commandList {
			c.out.WriteBulkString(cmd.name)
		}
	case bytes.EqualFold(sub, []byte("INFO")):
		c.out.WriteArray(len(args) - 2)
		for _, name := range args[2:] {
			if cmd := lookup(name); cmd != nil {
				writeCommandInfo(c, cmd)
			} else {
				c.out.WriteNull()
			}
		}
	case bytes.EqualFold(sub, []byte("DOCS")):
		writeCommandDocs(c, args[2:])
	default:
		return errorf("ERR", "unknown subcommand '%s'. Try COMMAND HELP.", sub)
	}
	return nil
}

// writeCommandInfo writes cmd's entry in Redis 7's ten-element form: name, arity,
// flags, first key, last key, key step, ACL categories, tips, key specs, subcommands.
func writeCommandInfo(c *client, cmd *command) {
	c.out.WriteArray(10)
	c.out.WriteBulkString(cmd.name)
	c.out.WriteInt(cmd.arity)
	flags, categories := commandFlags(cmd)
	writeStatuses(c, flags)
	key := 0
	if cmd.kind != 0 {
		key = 1
	}
	c.out.WriteInt(key)
	c.out.WriteInt(key)
	c.out.WriteInt(key)
	writeStatuses(c, categories)
	c.out.WriteArray(0) // tips
	if cmd.kind != 0 {
		writeKeySpec(c, cmd.kind)
	} else {
		c.out.WriteArray(0)
	}
	c.out.WriteArray(0) // subcommands
}

func commandFlags(cmd *command) (flags, categories []string) {
	switch cmd.kind {
	case counter.Count:
		return []string{"readonly", "fast"}, []string{"@read", "@fast"}
	case counter.Incr, counter.Allow, counter.Reset:
		return []string{"write", "fast"}, []string{"@write", "@fast"}
	}
	if cmd.noAuth {
		return []string{"noscript", "loading", "stale", "fast", "no_auth"}, []string{"@connection", "@fast"}
	}
	return []string{"noscript", "loading", "stale", "fast"}, []string{"@connection", "@fast"}
}

func writeStatuses(c *client, ss []string) {
	c.out.WriteArray(len(ss))
	for _, s := range ss {
		c.out.WriteString(s)
	}
}

// writeKeySpec writes the one key spec of an SW.* command: the key at index 1.
func writeKeySpec(c *client, kind counter.Kind) {
	access := []string{"RW", "UPDATE"}
	if kind == counter.Count {
		access = []string{"RO", "ACCESS"}
	}
	c.out.WriteArray(1)
	c.out.WriteArray(6)
	c.out.WriteBulkString("flags")
	writeStatuses(c, access)
	c.out.WriteBulkString("begin_search")
	c.out.WriteArray(4)
	c.out.WriteBulkString("type")
	c.out.WriteBulkString("index")
	c.out.WriteBulkString("spec")
	c.out.WriteArray(2)
	c.out.WriteBulkString("index")
	c.out.WriteInt(1)
	c.out.WriteBulkString("find_keys")
	c.out.WriteArray(4)
	c.out.WriteBulkString("type")
	c.out.WriteBulkString("range")
	c.out.WriteBulkString("spec")
	c.out.WriteArray(6)
	for _, kv := range [][2]any{{"lastkey", 0}, {"keystep", 1}, {"limit", 0}} {
		c.out.WriteBulkString(kv[0].(string))
		c.out.WriteInt(kv[1].(int))
	}
}

// writeCommandDocs answers COMMAND DOCS: a summary of each command asked for (all when
// none is named), enough for redis-cli's hints.
func writeCommandDocs(c *client, names [][]byte) {
	var cmds []*command
	if len(names) == 0 {
		cmds = commandList
	}
	for _, n := range names {
		if cmd := lookup(n); cmd != nil {
			cmds = append(cmds, cmd)
		}
	}
	c.out.WriteArray(2 * len(cmds))
	for _, cmd := range cmds {
		c.out.WriteBulkString(cmd.name)
		c.out.WriteArray(6)
		c.out.WriteBulkString("summary")
		c.out.WriteBulkString(commandSummary(cmd))
		c.out.WriteBulkString("since")
		c.out.WriteBulkString("1.0.0")
		c.out.WriteBulkString("group")
		group := "connection"
		if cmd.kind != 0 {
			group = "string"
		}
		c.out.WriteBulkString(group)
	}
}

func commandSummary(cmd *command) string {
	if cmd.kind != 0 {
		return strings.ToUpper(cmd.name) + " key window [BUCKETS b] ...: a sliding-window counter operation (see README)"
	}
	return "as Redis's " + strings.ToUpper(cmd.name)
}
