package fallback

import (
	"context"
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// scriptSet holds the store's scripts. merge_many is common.lua followed by its own
// file, so the ring rules are written once (the per-operation scripts of the package's
// tests, ops_test.go, are built the same way).
type scriptSet struct {
	mergeMany, stamp, late, mark, probe, members *redis.Script
}

var scripts = scriptSet{mergeMany: withCommon(mustRead("lua/merge_many.lua")),
	stamp: redis.NewScript(mustRead("lua/stamp.lua")), late: redis.NewScript(mustRead("lua/late.lua")),
	mark: redis.NewScript(mustRead("lua/mark.lua")), probe: redis.NewScript(mustRead("lua/probe.lua")),
	members: redis.NewScript(mustRead("lua/members.lua"))}

// withCommon is the script of src with common.lua before it.
func withCommon(src ...string) *redis.Script {
	return redis.NewScript(strings.Join(append([]string{mustRead("lua/common.lua")}, src...), "\n"))
}

func mustRead(name string) string {
	b, err := luaFS.ReadFile(name)
	if err != nil {
		panic(err) // the files are embedded: a missing one is a build mistake
	}
	return string(b)
}

// loaded is every script loadScripts loads, at Open and on a NOSCRIPT reply: scripts's,
// and in the package's tests their per-operation scripts too (ops_test.go adds them).
// members is not among them: it runs alone, never in a pipeline, and Script.Run sends it
// whole (EVAL) on NOSCRIPT.
var loaded = []*redis.Script{scripts.mergeMany, scripts.stamp, scripts.late, scripts.mark, scripts.probe}

// call is one script run: which script, its keys and its arguments. A batch's call
// (batchCall) keeps only its first key here, and its whole EVALSHA command in cmd.
type call struct {
	script *redis.Script
	keys   []string
	args   []any
	// cmd, when not nil, is the whole command: EVALSHA, the script's hash, the number of
	// keys, the keys, the arguments. It is sent as it is, where go-redis's EvalSha
	// copies keys and arguments into a command of its own: for a key flood's
	// write-behind, a copy of every counter's arguments (BenchmarkFlushDeltas).
	cmd []any
}

// evalSha queues c on pipe as an EVALSHA.
func (c call) evalSha(ctx context.Context, pipe redis.Pipeliner) *redis.Cmd {
	if c.cmd == nil {
		return c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	cmd := redis.NewCmd(ctx, c.cmd...)
	cmd.SetFirstKeyPos(3)
	_ = pipe.Process(ctx, cmd) // (a pipeline's Process only queues: errors come with Exec)
	return cmd
}

// loadScripts loads every script (on every master, in a Cluster).
func (st *Store) loadScripts(ctx context.Context) error {
	for _, s := range loaded {
		if err := s.Load(ctx, st.rdb).Err(); err != nil {
			return err
		}
	}
	return nil
}

// run runs one call: EVALSHA, and EVAL (which caches the script again) on NOSCRIPT.
func (st *Store) run(ctx context.Context, c call) *redis.Cmd {
	var cmd *redis.Cmd
	err := st.guard(ctx, func() error {
		cmd = c.script.Run(ctx, st.rdb, c.keys, c.args...)
		return cmd.Err()
	})
	if cmd == nil {
		return failed(ctx, 1, err)[0]
	}
	return cmd
}

// failed makes n commands that failed with err without being sent.
func failed(ctx context.Context, n int, err error) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	for i := range cmds {
		cmds[i] = redis.NewCmd(ctx)
		cmds[i].SetErr(err)
	}
	return cmds
}

// runAll runs calls in one pipeline of EVALSHAs and returns their commands in order,
// and whether it tried: false when the breaker or a done ctx refused them before any
// I/O. Calls that found their script missing (Redis restarted or failed over) are run
// again, in order, after the scripts are loaded: a NOSCRIPT reply means the script did
// not run.
//
// A Cluster client splits the pipeline by node; calls on one counter share a slot, so
// they stay in order. (Should another client load some scripts between two of our
// commands just after a restart, a counter's later call could run before an earlier one
// that hit NOSCRIPT; both still run once.)
func (st *Store) runAll(ctx context.Context, calls []call) (cmds []*redis.Cmd, tried bool) {
	if len(calls) == 0 {
		return nil, false
	}
	err := st.guard(ctx, func() error {
		tried = true
		cmds = st.runPipelines(ctx, calls)
		return pipelineErr(cmds)
	})
	if cmds == nil {
		return failed(ctx, len(calls), err), tried
	}
	return cmds, tried
}

func (st *Store) runPipelines(ctx context.Context, calls []call) []*redis.Cmd {
	cmds := st.pipeline(ctx, calls)
	var again []int
	for i, c := range cmds {
		if isNoScript(c.Err()) {
			again = append(again, i)
		}
	}
	if len(again) == 0 || st.loadScripts(ctx) != nil {
		return cmds
	}
	retry := make([]call, len(again))
	for k, i := range again {
		retry[k] = calls[i]
	}
	for k, c := range st.pipeline(ctx, retry) {
		cmds[again[k]] = c
	}
	return cmds
}

func (st *Store) pipeline(ctx context.Context, calls []call) []*redis.Cmd {
	if len(calls) == 0 {
		return nil
	}
	if cc, ok := st.rdb.(*redis.ClusterClient); ok && st.cfg.WaitReplicas > 0 {
		return st.pipelineByMaster(ctx, cc, calls)
	}
	pipe := st.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = c.evalSha(ctx, pipe)
	}
	wait := st.addWait(ctx, pipe)
	_, _ = pipe.Exec(ctx) // each command carries its own error
	v, err := st.replicated(wait)
	st.noteReplicas(v)
	if err != nil {
		for _, c := range cmds {
			if c.Err() == nil {
				c.SetErr(err) // ran, and may be lost by a failover: in doubt
			}
		}
	}
	return cmds
}
