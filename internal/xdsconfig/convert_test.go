package xdsconfig

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/leapcount/leapcount/limits"
)

func anyOf(t *testing.T, configs ...*rlconf.RateLimitConfig) []*anypb.Any {
	t.Helper()
	out := make([]*anypb.Any, len(configs))
	for i, c := range configs {
		a, err := anypb.New(c)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = a
	}
	return out
}

// withUnknown is m with raw appended to its unknown fields: what a newer proto's
// fields look like to this module's.
func withUnknown[M proto.Message](m M, raw []byte) M {
	m.ProtoReflect().SetUnknown(append(m.ProtoReflect().GetUnknown(), raw...))
	return m
}

func boolField(num protowire.Number) []byte {
	b := protowire.AppendTag(nil, num, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}

// stripPlaces clears what says where a file's parts were (names and lines), which
// differ between a rendering and a file written by hand.
func stripPlaces(ds []limits.Descriptor) {
	for i := range ds {
		ds[i].Line = 0
		if r := ds[i].Rule; r != nil {
			r.File, r.Line = "", 0
		}
		stripPlaces(ds[i].Descriptors)
	}
}

// A RateLimitConfig reads as the YAML file envoyproxy/ratelimit makes of it: every
// field of the proto, and those of the newer proto this one lacks (quota_mode, the
// units WEEK and MONTH), read from its unknown fields.
func TestConfigReadsAsTheFileItStandsFor(t *testing.T) {
	metadata := protowire.AppendTag(nil, descriptorMetadata, protowire.BytesType)
	metadata = protowire.AppendBytes(metadata, []byte{0x0a, 0x00}) // a Struct of one empty entry: not used
	pb := &rlconf.RateLimitConfig{Name: "edge-config", Domain: "edge", Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "user", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_MINUTE, RequestsPerUnit: 10, Name: "per-user"}},
		{Key: "path", Value: "/admin*", ShadowMode: true, DetailedMetric: true,
			RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit(limits.Week), RequestsPerUnit: 5,
				Replaces: []*rlconf.RateLimitReplace{{Name: "per-user"}}},
			Descriptors: []*rlconf.RateLimitDescriptor{
				withUnknown(&rlconf.RateLimitDescriptor{Key: "method", Value: "true", RateLimit: &rlconf.RateLimitPolicy{Unlimited: true}}, metadata),
				withUnknown(&rlconf.RateLimitDescriptor{Key: "quota", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit(limits.Month), RequestsPerUnit: 1000}},
					boolField(descriptorQuotaMode)),
			}},
	}}
	const file = `domain: edge
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10, name: per-user}
  - key: path
    value: /admin*
    shadow_mode: true
    detailed_metric: true
    rate_limit:
      unit: week
      requests_per_unit: 5
      replaces: [{name: per-user}]
    descriptors:
      - key: method
        value: "true"
        metadata: {anything: 1}
        rate_limit: {unlimited: true}
      - key: quota
        quota_mode: true
        rate_limit: {unit: month, requests_per_unit: 1000}
`
	conv, err := convert(anyOf(t, pb))
	if err != nil {
		t.Fatal(err)
	}
	want, err := limits.Parse("file.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	got := conv.files[0]
	if got.Name != `RateLimitConfig "edge-config"` {
		t.Errorf("file named %q; want it named after its resource", got.Name)
	}
	stripPlaces(got.Descriptors)
	stripPlaces(want.Descriptors)
	got.Name, want.Name = "", ""
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("from xDS:\n%s\nfrom the file:\n%s", g, w)
	}
}

// A config that breaks a rule of the files is an error naming the resource and the
// field (not a line of the rendering, which no one sees), with the file's message;
// so is a field no proto leapcount knows has, and nesting past maxDepth.
func TestBadConfigsNameTheirResourceAndField(t *testing.T) {
	deep := &rlconf.RateLimitDescriptor{Key: "k"}
	for range maxDepth {
		deep = &rlconf.RateLimitDescriptor{Key: "k", Descriptors: []*rlconf.RateLimitDescriptor{deep}}
	}
	rl := func(unit rlconf.RateLimitUnit, n uint32) *rlconf.RateLimitPolicy {
		return &rlconf.RateLimitPolicy{Unit: unit, RequestsPerUnit: n}
	}
	for _, c := range []struct {
		name string
		cfg  *rlconf.RateLimitConfig
		want string
	}{
		{"unknown unit", &rlconf.RateLimitConfig{Name: "c", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "a", RateLimit: rl(rlconf.RateLimitUnit_SECOND, 1)}, {Key: "b", RateLimit: rl(99, 1)}}},
			`RateLimitConfig "c": descriptors[1].rate_limit.unit: invalid rate limit unit '99'`},
		{"unit left unknown", &rlconf.RateLimitConfig{Name: "c", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{{Key: "a", RateLimit: rl(0, 5)}}},
			`RateLimitConfig "c": descriptors[0].rate_limit.unit: invalid rate limit unit 'UNKNOWN'`},
		{"empty domain", &rlconf.RateLimitConfig{Name: "c"}, `RateLimitConfig "c": domain: config file cannot have empty domain`},
		{"empty key", &rlconf.RateLimitConfig{Name: "c", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "a", Descriptors: []*rlconf.RateLimitDescriptor{{Value: "v"}}}}},
			`RateLimitConfig "c": descriptors[0].descriptors[0].key: descriptor has empty key`},
		{"unlimited with a unit", &rlconf.RateLimitConfig{Name: "c", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "a", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_HOUR, Unlimited: true}}}},
			`RateLimitConfig "c": descriptors[0].rate_limit.unit: should not specify rate limit unit when unlimited`},
		{"an unknown field", &rlconf.RateLimitConfig{Name: "c", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "a", RateLimit: withUnknown(rl(rlconf.RateLimitUnit_HOUR, 1), boolField(9))}}},
			`RateLimitConfig "c": descriptors[0].rate_limit: field 9 is not one leapcount knows`},
		{"too deep", &rlconf.RateLimitConfig{Name: "c", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{deep}},
			"descriptors nest more than 32 deep"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := convert(anyOf(t, c.cfg))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want %q", err, c.want)
			}
		})
	}
}

// An error of building the files (Apply's: a descriptor twice, a domain in two
// resources) names the resource and field too.
func TestBuildErrorsNameTheirResourceAndField(t *testing.T) {
	dup := &rlconf.RateLimitConfig{Name: "c", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "a", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_SECOND, RequestsPerUnit: 1}},
		{Key: "b"}, {Key: "a"}}}
	other := &rlconf.RateLimitConfig{Name: "c2", Domain: "d"}
	for _, c := range []struct {
		configs []*rlconf.RateLimitConfig
		want    string
	}{
		{[]*rlconf.RateLimitConfig{dup}, `RateLimitConfig "c": descriptors[2].key: duplicate descriptor composite key 'd.a'`},
		{[]*rlconf.RateLimitConfig{other, other}, `RateLimitConfig "c2" (resource 1): duplicate domain 'd' in config file`},
	} {
		conv, err := convert(anyOf(t, c.configs...))
		if err != nil {
			t.Fatal(err)
		}
		_, err = limits.Build(conv.files, false)
		if err = conv.explain(err); err == nil || err.Error() != c.want {
			t.Errorf("got %v; want %q", err, c.want)
		}
	}
}

// Keys and values reach the rules as sent, whatever YAML would make of them unquoted.
func TestKeysAndValuesReadAsSent(t *testing.T) {
	odd := []string{"null", "~", "true", "no", "0x1F", "1e3", "a\nb", ": x", "- y", "#z", " padded ", "*", "é✓"}
	pb := &rlconf.RateLimitConfig{Name: "c", Domain: "d"}
	for i, v := range odd {
		pb.Descriptors = append(pb.Descriptors, &rlconf.RateLimitDescriptor{Key: v, Value: v,
			RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_SECOND, RequestsPerUnit: uint32(i + 1)}})
	}
	conv, err := convert(anyOf(t, pb))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := limits.Build(conv.files, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range odd {
		r, _ := rules.Lookup("d", []limits.Entry{{Key: v, Value: v}})
		if r == nil || r.Limits[0].RequestsPerUnit != uint32(i+1) {
			t.Errorf("%q=%q: rule %+v; want %d a second", v, v, r, i+1)
		}
	}
}
