package fallback

import (
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
	"github.com/redis/go-redis/v9"
)

func TestURLForms(t *testing.T) {
	cfg := Config{}.withDefaults()
	for _, tc := range []struct {
		url, kind string
	}{
		{"redis://127.0.0.1:6379/0", "single"},
		{"redis://u:p@127.0.0.1:6379/2", "single"},
		{"rediss://127.0.0.1:6379/0", "single"},
		{"unix:///tmp/redis.sock", "single"},
		{"redis+sentinel://127.0.0.1:26379/0?master=m&addr=127.0.0.1:26380", "sentinel"},
		{"redis+cluster://127.0.0.1:7000?addr=127.0.0.1:7001", "cluster"},
	} {
		c := cfg
		c.URL = tc.url
		rdb, err := newClient(c)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		kind := "single"
		if _, ok := rdb.(*redis.ClusterClient); ok {
			kind = "cluster"
		}
		if strings.Contains(tc.url, "sentinel") { // a failover client is a *redis.Client
			kind = "sentinel"
		}
		if kind != tc.kind {
			t.Errorf("%s: got a %s client; want %s", tc.url, kind, tc.kind)
		}
		_ = rdb.Close()
	}
	for _, bad := range []string{"http://x", "redis+sentinel://127.0.0.1:26379/0", "redis+cluster://127.0.0.1:7000/3",
		"redis://127.0.0.1:6379/0?nonsense=1", "redis+mesh://x"} {
		c := cfg
		c.URL = bad
		if rdb, err := newClient(c); err == nil {
			_ = rdb.Close()
			t.Errorf("%s: accepted; want an error", bad)
		}
	}
}

// Short timeouts by default; the URL's own win; retries off.
func TestTimeouts(t *testing.T) {
	for _, tc := range []struct {
		url  string
		cfg  Config
		want time.Duration
	}{
		{"redis://127.0.0.1:6379/0", Config{}, DefaultTimeout},
		{"redis://127.0.0.1:6379/0", Config{ReadTimeout: 300 * time.Millisecond}, 300 * time.Millisecond},
		{"redis://127.0.0.1:6379/0?read_timeout=150ms", Config{ReadTimeout: 300 * time.Millisecond}, 150 * time.Millisecond},
	} {
		c := tc.cfg.withDefaults()
		c.URL = tc.url
		rdb, err := newClient(c)
		if err != nil {
			t.Fatal(err)
		}
		o := rdb.(*redis.Client).Options()
		if o.ReadTimeout != tc.want || o.DialTimeout != DefaultTimeout || o.MaxRetries != 0 || o.DialerRetries != 1 { // -1 given: 0 after go-redis normalizes it
			t.Errorf("%s %+v: read %v dial %v retries %d dialer retries %d; want read %v, dial %v, no retries",
				tc.url, tc.cfg, o.ReadTimeout, o.DialTimeout, o.MaxRetries, o.DialerRetries, tc.want, DefaultTimeout)
		}
		_ = rdb.Close()
	}
}

// Through a real Sentinel: the store finds the master and works.
func TestSentinel(t *testing.T) {
	master := testredis.Start(t)
	sentinel := testredis.StartSentinel(t, master, "mymaster")
	st := open(t, testredis.SentinelURL(sentinel, "mymaster"), Config{})
	sp := spec(1000, 10)
	if c, err := st.Incr(bg, "k", sp, 5, 1_700_000_000_000); err != nil || c != 5 {
		t.Fatalf("Incr through Sentinel = %d, %v; want 5", c, err)
	}
	if n := master.Client(t).Exists(bg, counterKey("k", sp)).Val(); n != 1 {
		t.Fatalf("the counter is not on the master (EXISTS = %d)", n)
	}
}

func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{{"7.0.15", false}, {"7.4.0", true}, {"8.0.2", true}, {"6.2.1", false}, {"", false}, {"x.y", false}} {
		if got := versionAtLeast(tc.v, 7, 4); got != tc.want {
			t.Errorf("versionAtLeast(%q, 7, 4) = %v; want %v", tc.v, got, tc.want)
		}
	}
	_, st := startStore(t)
	if st.ServerVersion() == "" {
		t.Fatal("ServerVersion is empty")
	}
	t.Logf("redis %s, hash-field expiry %v", st.ServerVersion(), st.HashFieldExpiry())
}
