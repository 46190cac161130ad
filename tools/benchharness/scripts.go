package benchharness

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The Redis sides' scripts, written for the harness from the algorithms the seeds
// describe (see the comments at their tops).
var (
	//go:embed lua/hashwindow.lua
	hashWindowLua string
	//go:embed lua/zsetlog.lua
	zsetLogLua string
)

// shas are the scripts' SHA1s once loaded into a server.
type shas struct{ hashWindow, zsetLog string }

func loadScripts(ctx context.Context, c *redis.Client) (shas, error) {
	var s shas
	for _, x := range []struct {
		dst *string
		src string
	}{{&s.hashWindow, hashWindowLua}, {&s.zsetLog, zsetLogLua}} {
		sha, err := c.ScriptLoad(ctx, x.src).Result()
		if err != nil {
			return s, fmt.Errorf("SCRIPT LOAD: %w", err)
		}
		*x.dst = sha
	}
	return s, nil
}

// loaderCheck is what checkLoader found: whether the loader leaves a counter as the
// window script does, and the bytes one such counter holds (MEMORY USAGE).
type loaderCheck struct {
	Same         bool
	ScriptBytes  int64
	LoaderBytes  int64
	ScriptFields int
}

// checkLoader runs hashwindow.lua on one key once in each of `touches` buckets (the
// client's clock stepped by the bucket length) and the loader (loaderRequest) on
// another, and compares the hashes they leave: fields, values and MEMORY USAGE.
func checkLoader(ctx context.Context, r *redisServer, s shas, sp memShape, touches int) (loaderCheck, error) {
	const a, b = "loadercheck:script", "loadercheck:load0" // b: the loader's key 0 of prefix loadercheck:load
	c := r.client
	first := nowMs()/sp.bucketMs() - int64(touches) + 1
	for j := first; j < first+int64(touches); j++ {
		if err := c.EvalSha(ctx, s.hashWindow, []string{a}, j*sp.bucketMs(), sp.windowMs, sp.buckets, 1).Err(); err != nil {
			return loaderCheck{}, err
		}
	}
	if err := runLoader(ctx, r.addr, memCase{n: 1, shape: sp}, first, touches, "loadercheck:load"); err != nil {
		return loaderCheck{}, err
	}
	ha, err1 := c.HGetAll(ctx, a).Result()
	hb, err2 := c.HGetAll(ctx, b).Result()
	ma, err3 := c.MemoryUsage(ctx, a).Result()
	mb, err4 := c.MemoryUsage(ctx, b).Result()
	if err := firstErr(err1, err2, err3, err4); err != nil {
		return loaderCheck{}, err
	}
	c.Del(ctx, a, b)
	return loaderCheck{Same: sameHash(ha, hb) && ma == mb, ScriptBytes: ma, LoaderBytes: mb, ScriptFields: len(ha)}, nil
}

func sameHash(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if x, ok := b[k]; !ok || x != v {
			return false
		}
	}
	return true
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// redisConfig is a line of CONFIG GET, for the report (the encodings that decide a
// small hash's and sorted set's size).
func redisConfig(ctx context.Context, c *redis.Client, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if v, err := c.ConfigGet(ctx, n).Result(); err == nil {
			for k, x := range v {
				out[k] = x
			}
		}
	}
	return out
}
