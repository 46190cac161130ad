package limits

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, names ...string) []*File {
	t.Helper()
	var out []*File
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join("testdata", "ratelimit", name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(name, data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, f)
	}
	return out
}

func mustBuild(t *testing.T, merge bool, names ...string) *Rules {
	t.Helper()
	rs, err := Build(mustParse(t, names...), merge)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// envoyproxy/ratelimit's own test configs (testdata/ratelimit, from its repository)
// load here as they load there, and those its tests reject are rejected, with the file
// and, where there is one, the line.
func TestRatelimitsTestConfigsLoadOrAreRejectedAsThere(t *testing.T) {
	for _, c := range []struct {
		file, want string // want: "" loads; else the error holds it
	}{
		{"basic_config.yaml", ""},
		{"metadata.yaml", ""},
		{"shadowmode_config.yaml", ""},
		{"share_threshold.yaml", ""},
		{"wildcard.yaml", ""},
		{"merge_domain_key1.yaml", ""},
		{"example_config.yaml", ""},
		{"example_example.yaml", ""},
		{"bad_limit_unit.yaml", "bad_limit_unit.yaml:6: invalid rate limit unit 'foo'"},
		{"bad_yaml.yaml", "bad_yaml.yaml:2: found unexpected end of stream"},
		{"duplicate_key.yaml", "duplicate_key.yaml:6: duplicate descriptor composite key 'test-domain.key1_value1'"},
		{"empty_domain.yaml", "empty_domain.yaml:1: config file cannot have empty domain"},
		{"empty_key.yaml", "empty_key.yaml:3: descriptor has empty key"},
		{"misspelled_key.yaml", `misspelled_key.yaml:6: unknown field "ratelimit" here`},
		{"misspelled_key2.yaml", `misspelled_key2.yaml:7: unknown field "requestsperunit" here`},
		{"non_map_list.yaml", "non_map_list.yaml:3: list holds \"a\", not a mapping"},
		{"non_string_key.yaml", `non_string_key.yaml:1: key "0.25" is not a string`},
		{"replaces_empty.yaml", "replaces_empty.yaml:10: should not have an empty replaces entry"},
		{"replaces_self.yaml", "replaces_self.yaml:8: replaces should not contain name of same descriptor"},
		{"unlimited_with_unit.yaml", "unlimited_with_unit.yaml:5: should not specify rate limit unit when unlimited"},
	} {
		_, _, err := LoadPath(filepath.Join("testdata", "ratelimit", c.file), false)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v; want it loaded", c.file, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v; want one holding %q", c.file, err, c.want)
		}
	}
	if _, err := Build(mustParse(t, "basic_config.yaml", "duplicate_domain.yaml"), false); err == nil ||
		!strings.Contains(err.Error(), "duplicate_domain.yaml: duplicate domain 'test-domain' in config file") {
		t.Errorf("a domain in two files without merging: %v; want the duplicate domain named", err)
	}
	if _, err := Build(mustParse(t, "basic_config.yaml", "duplicate_domain.yaml"), true); err != nil {
		t.Errorf("a domain in two files, merged: %v", err)
	}
}

type lookup struct {
	entries   []Entry
	key       string // "": no rule
	perUnit   uint32
	unit      Unit
	unlimited bool
	name      string
}

func checkLookups(t *testing.T, rs *Rules, domain string, cases []lookup) {
	t.Helper()
	for _, c := range cases {
		r, _ := rs.Lookup(domain, c.entries)
		if c.key == "" {
			if r != nil {
				t.Errorf("%v: rule %s; want none", c.entries, r.Key)
			}
			continue
		}
		if r == nil {
			t.Errorf("%v: no rule; want %s", c.entries, c.key)
			continue
		}
		if r.Key != c.key || r.Unlimited != c.unlimited {
			t.Errorf("%v: rule %s unlimited %v; want %s unlimited %v", c.entries, r.Key, r.Unlimited, c.key, c.unlimited)
		}
		if c.unlimited {
			continue
		}
		if len(r.Limits) != 1 || r.Limits[0].RequestsPerUnit != c.perUnit || r.Limits[0].Unit != c.unit || r.Limits[0].Name != c.name {
			t.Errorf("%v: limits %+v; want %d per %v named %q", c.entries, r.Limits, c.perUnit, c.unit, c.name)
		}
	}
}

// The lookups of envoyproxy/ratelimit's TestBasicConfig and TestWildcardConfig, with
// the answers its tests expect.
func TestLookupMatchesAsRatelimitDoes(t *testing.T) {
	rs := mustBuild(t, false, "basic_config.yaml")
	if r, _ := rs.Lookup("foo_domain", nil); r != nil {
		t.Fatal("a rule for an unknown domain")
	}
	if r, _ := rs.Lookup("test-domain", nil); r != nil {
		t.Fatal("a rule for an unknown domain or an empty descriptor")
	}
	e := func(kv ...string) []Entry {
		var out []Entry
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, Entry{kv[i], kv[i+1]})
		}
		return out
	}
	checkLookups(t, rs, "test-domain", []lookup{
		{entries: e("key1", "something")},
		{entries: e("key1", "value1")},
		{entries: e("key2", "value2", "subkey", "subvalue")},
		{entries: e("key5", "value5", "subkey5", "subvalue")},
		{entries: e("key1", "value1", "subkey1", "something"), key: "test-domain.key1_value1.subkey1", perUnit: 5, unit: Second},
		{entries: e("key1", "value1", "subkey1", "subvalue1"), key: "test-domain.key1_value1.subkey1_subvalue1", perUnit: 10, unit: Second},
		{entries: e("key2", "something"), key: "test-domain.key2", perUnit: 20, unit: Minute},
		{entries: e("key2", "value2"), key: "test-domain.key2_value2", perUnit: 30, unit: Minute},
		{entries: e("key2", "value3")},
		{entries: e("key3", "foo"), key: "test-domain.key3", perUnit: 1, unit: Hour},
		{entries: e("key4", "foo"), key: "test-domain.key4", perUnit: 1, unit: Day, name: "key4_rate_limit"},
		{entries: e("key5", "value5", "subkey5", "subvalue5"), key: "test-domain.key5_value5.subkey5_subvalue5", perUnit: 25, unit: Day},
		{entries: e("key6", "foo"), key: "test-domain.key6", unlimited: true},
	})
	rs = mustBuild(t, false, "wildcard.yaml")
	checkLookups(t, rs, "test-domain", []lookup{
		{entries: e("wild", "foo1"), key: "test-domain.wild_foo*", perUnit: 20, unit: Minute},
		{entries: e("wild", "foo"), key: "test-domain.wild_foo*", perUnit: 20, unit: Minute},
		{entries: e("wild", "bar")},
		{entries: e("noWild", "foo1")},
		{entries: e("noVal", "anything"), key: "test-domain.noVal", perUnit: 20, unit: Minute},
		{entries: e("midWild", "barXXb"), key: "test-domain.midWild_bar*b", perUnit: 20, unit: Minute},
		{entries: e("midWild", "barb"), key: "test-domain.midWild_bar*b", perUnit: 20, unit: Minute},
		{entries: e("midWild", "barXbX")},
		{entries: e("multiWild", "foo1bar2baz"), key: "test-domain.multiWild_foo*bar*baz", perUnit: 10, unit: Minute},
		{entries: e("multiWild", "foobarbaz"), key: "test-domain.multiWild_foo*bar*baz", perUnit: 10, unit: Minute},
		{entries: e("multiWild", "foo1baz2bar")},
		{entries: e("nestedWild", "val1", "wild", "goo2"), key: "test-domain.nestedWild_val1.wild_goo*", perUnit: 20, unit: Minute},
		{entries: e("nestedWild", "val2", "wild", "goo2")},
	})
	rs = mustBuild(t, true, "merge_domain_key1.yaml", "merge_domain_key2.yaml")
	checkLookups(t, rs, "test-domain", []lookup{
		{entries: e("key1", "value1"), key: "test-domain.key1_value1", perUnit: 10, unit: Minute},
		{entries: e("key2", "value2"), key: "test-domain.key2_value2", perUnit: 20, unit: Minute},
	})
}

// leapcount's extensions: window (any length), buckets, and several limits on one
// descriptor; and their mistakes, each named with its line.
func TestExtensions(t *testing.T) {
	f, err := Parse("ext.yaml", []byte(`domain: d
descriptors:
  - key: user
    rate_limits:
      - {requests_per_unit: 10, unit: second, name: burst}
      - {requests_per_unit: 300, window: 90s, buckets: 30, name: sustained}
  - key: ip
    rate_limit: {requests_per_unit: 5, unit: minute, buckets: 1}
  - key: day
    rate_limit: {requests_per_unit: 5, window: 24h}
`))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Build([]*File{f}, false)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := rs.Lookup("d", []Entry{{"user", "u1"}})
	if r == nil || len(r.Limits) != 2 || r.Limits[0].Window != time.Second || r.Limits[1].Window != 90*time.Second ||
		r.Limits[1].Buckets != 30 || r.Limits[1].Unit != UnitUnknown || r.Limits[1].Name != "sustained" {
		t.Fatalf("user: %+v; want a 10/s burst and 300 per 90s in 30 buckets", r)
	}
	if r, _ := rs.Lookup("d", []Entry{{"ip", "x"}}); r == nil || r.Limits[0].Buckets != 1 || r.Limits[0].Window != time.Minute {
		t.Fatalf("ip: %+v; want 5 a minute in 1 bucket", r)
	}
	if r, _ := rs.Lookup("d", []Entry{{"day", "x"}}); r == nil || r.Limits[0].Unit != Day || r.Limits[0].Window != 24*time.Hour {
		t.Fatalf("day: %+v; want a window of one day, named DAY", r)
	}
	for _, c := range []struct{ yaml, want string }{
		{"rate_limit: {requests_per_unit: 1, unit: minute, buckets: 0}", "bad.yaml:4: buckets must be"},
		{"rate_limit: {requests_per_unit: 1, unit: minute, window: 2m}", "bad.yaml:4: window 2m0s and unit MINUTE disagree"},
		{"rate_limit: {requests_per_unit: 1, window: soon}", `bad.yaml:4: window "soon" is not a duration`},
		{"rate_limit: {requests_per_unit: -1, unit: minute}", "bad.yaml:4: want a whole number"},
		{"rate_limit: {requests_per_unit: 1}", "bad.yaml:4: invalid rate limit unit ''"},
		{"rate_limit: {unlimited: true, window: 1s}", "bad.yaml:4: should not specify rate limit unit when unlimited"},
		{"rate_limits: [{unlimited: true}, {requests_per_unit: 1, unit: second}]", "bad.yaml:4: an unlimited descriptor has no other limits"},
		{"shadow_mode: yes please", "bad.yaml:4: want true or false"},
		{"key: other", `bad.yaml:4: field "key" given twice`},
		{"value: 'a'\n    share_threshold: true", "share_threshold can only be used with wildcard values"},
		{"rate_limit: {unit: minute, requests_per_unit: [", "bad.yaml:4: did not find expected node content"}, // YAML syntax: file:line too
	} {
		_, err := Parse("bad.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    "+c.yaml+"\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error holding %q", c.yaml, err, c.want)
		}
	}
}

// A directory is every .yaml and .yml file in it, in name order, hidden entries left
// out: a Kubernetes ConfigMap mounts its files as links into a hidden directory.
func TestLoadPathReadsADirectoryAsAConfigMapMountsIt(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_11_27_10_00_00.1")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"a.yaml": "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
		"b.yml":  "domain: b\ndescriptors:\n",
		"notes":  "not a config",
	} {
		if err := os.WriteFile(filepath.Join(data, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")))
	for _, name := range []string{"a.yaml", "b.yml", "notes"} {
		must(os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
	}
	rs, files, err := LoadPath(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || !rs.HasDomain("a") || !rs.HasDomain("b") || !hasRule(rs, "a", Entry{"k", "v"}) {
		t.Fatalf("read %v, domains %v; want a.yaml and b.yml, domains a and b", files, rs.Domains())
	}
}

func hasRule(rs *Rules, domain string, entries ...Entry) bool {
	r, _ := rs.Lookup(domain, entries)
	return r != nil
}

// A wildcard value with share_threshold counts as its pattern: every value it matches
// shares one counter (envoyproxy/ratelimit's share_threshold.yaml).
func TestShareThresholdNamesThePatternCountedAs(t *testing.T) {
	rs := mustBuild(t, false, "share_threshold.yaml")
	r, shared := rs.Lookup("test-domain", []Entry{{"files", "files/a.txt"}})
	if r == nil || len(shared) != 1 || shared[0] != "files/*" {
		t.Fatalf("files/a.txt: rule %v shared %q; want the files/* rule, shared as files/*", r, shared)
	}
	r, shared = rs.Lookup("test-domain", []Entry{{"nested", "parent"}, {"files", "nested/x"}})
	if r == nil || len(shared) != 2 || shared[0] != "" || shared[1] != "nested/*" {
		t.Fatalf("nested: rule %v shared %q; want shared [\"\" nested/*]", r, shared)
	}
	if _, shared := rs.Lookup("test-domain", []Entry{{"route", "api/v1"}, {"method", "GET"}}); len(shared) != 2 || shared[0] != "api/*" {
		t.Fatalf("route: shared %q; want api/* first", shared)
	}
}

// The example README points to loads, and answers as its comments say.
func TestTheExampleConfigLoads(t *testing.T) {
	rs, _, err := LoadPath(filepath.Join("..", "examples", "ratelimit.yaml"), false)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := rs.Lookup("edge", []Entry{{"path", "/api/login"}})
	if r == nil || len(r.Limits) != 2 || r.Limits[1].Window != 90*time.Second {
		t.Fatalf("/api/login: %+v; want a burst and a 90 s limit", r)
	}
	if r, _ := rs.Lookup("edge", []Entry{{"path", "/api/orders"}}); r == nil || r.Limits[0].Buckets != 1 {
		t.Fatalf("/api/orders: %+v; want the fixed 1000 a minute", r)
	}
	if r, _ := rs.Lookup("edge", []Entry{{"path", "/healthz"}}); r == nil || !r.Unlimited {
		t.Fatalf("/healthz: %+v; want unlimited", r)
	}
}

// value_to_metric names a rule's stats as envoyproxy/ratelimit's tests expect
// (test/config/config_test.go, TestValueToMetric_*): the request's value where a level
// with the flag matched by key alone or by wildcard, the configured value elsewhere.
func TestMetricKeyNamesValuesAsRatelimitDoes(t *testing.T) {
	f, err := Parse("v2m.yaml", []byte(`domain: domain
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: minute, requests_per_unit: 100}
  - key: api
    descriptors:
      - key: method
        value: GET
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: path
        value: /v1/*
        rate_limit: {unit: minute, requests_per_unit: 1}
  - key: mixed
    value_to_metric: true
    descriptors:
      - key: http_method
        value: GET
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
`))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Build([]*File{f}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		entries []Entry
		want    string
	}{
		{[]Entry{{"route", "draw"}, {"http_method", "GET"}, {"subject_id", "123"}}, "domain.route_draw.http_method_GET.subject_id"},
		{[]Entry{{"user", "alice"}, {"action", "readfile"}, {"resource", "documents"}}, "domain.user_alice.action_readfile.resource"},
		{[]Entry{{"mixed", "api"}, {"http_method", "GET"}, {"subject_id", "u1"}}, "domain.mixed_api.http_method_GET.subject_id"},
	} {
		r, _ := rs.Lookup("domain", c.entries)
		if r == nil || !r.ValueToMetric {
			t.Fatalf("%v: rule %+v; want one with ValueToMetric", c.entries, r)
		}
		if got := rs.MetricKey("domain", c.entries); got != c.want {
			t.Errorf("MetricKey(%v) = %q, want %q", c.entries, got, c.want)
		}
	}
	// Without the flag on its path a rule keeps its configured name, which MetricKey
	// gives too.
	for _, es := range [][]Entry{{{"api", "x"}, {"method", "GET"}}, {{"api", "x"}, {"path", "/v1/users"}}} {
		r, _ := rs.Lookup("domain", es)
		if r == nil || r.ValueToMetric {
			t.Fatalf("%v: rule %+v; want one without ValueToMetric", es, r)
		}
		if got := rs.MetricKey("domain", es); got != r.Key {
			t.Errorf("MetricKey(%v) = %q, want the rule's key %q", es, got, r.Key)
		}
	}
}
