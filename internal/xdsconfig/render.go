package xdsconfig

import (
	"fmt"
	"slices"
	"strconv"

	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/leapcount/leapcount/limits"
)

// A RateLimitConfig is rendered as the YAML file envoyproxy/ratelimit makes of it
// (domain, descriptors, and each descriptor's key, value, rate_limit with unit and
// requests_per_unit, unlimited, name and replaces, shadow_mode, quota_mode,
// detailed_metric), without judging any of it: limits.Parse does.

// maxDepth bounds how deeply descriptors nest in one resource.
const maxDepth = 32

// render is the YAML document of c; its errors name the field (path) at fault.
func render(c *rlconf.RateLimitConfig) (*yaml.Node, error) {
	if err := newerFields(c, "", nil); err != nil {
		return nil, err
	}
	ds, err := descriptors(c.GetDescriptors(), "descriptors", 1)
	if err != nil {
		return nil, err
	}
	top := mapping()
	add(top, "domain", str(c.GetDomain()))
	if ds != nil {
		add(top, "descriptors", ds)
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{top}}, nil
}

func descriptors(ds []*rlconf.RateLimitDescriptor, at string, depth int) (*yaml.Node, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	if depth > maxDepth {
		return nil, fmt.Errorf("%s: descriptors nest more than %d deep", at, maxDepth)
	}
	list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for i, d := range ds {
		n, err := descriptor(d, fmt.Sprintf("%s[%d]", at, i), depth)
		if err != nil {
			return nil, err
		}
		list.Content = append(list.Content, n)
	}
	return list, nil
}

func descriptor(d *rlconf.RateLimitDescriptor, at string, depth int) (*yaml.Node, error) {
	var quota bool
	if err := newerFields(d, at, map[protowire.Number]*bool{descriptorQuotaMode: &quota}, descriptorMetadata); err != nil {
		return nil, err
	}
	n := mapping()
	add(n, "key", str(d.GetKey()))
	if d.GetValue() != "" {
		add(n, "value", str(d.GetValue()))
	}
	if p := d.GetRateLimit(); p != nil {
		rl, err := policy(p, at+".rate_limit")
		if err != nil {
			return nil, err
		}
		add(n, "rate_limit", rl)
	}
	sub, err := descriptors(d.GetDescriptors(), at+".descriptors", depth+1)
	if err != nil {
		return nil, err
	}
	if sub != nil {
		add(n, "descriptors", sub)
	}
	for _, f := range []struct {
		name string
		on   bool
	}{{"shadow_mode", d.GetShadowMode()}, {"quota_mode", quota}, {"detailed_metric", d.GetDetailedMetric()}} {
		if f.on {
			add(n, f.name, boolean(true))
		}
	}
	return n, nil
}

func policy(p *rlconf.RateLimitPolicy, at string) (*yaml.Node, error) {
	if err := newerFields(p, at, nil); err != nil {
		return nil, err
	}
	n := mapping()
	add(n, "unit", str(unitName(p.GetUnit())))
	add(n, "requests_per_unit", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(uint64(p.GetRequestsPerUnit()), 10)})
	if p.GetUnlimited() {
		add(n, "unlimited", boolean(true))
	}
	if p.GetName() != "" {
		add(n, "name", str(p.GetName()))
	}
	if rs := p.GetReplaces(); len(rs) > 0 {
		list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for i, r := range rs {
			if err := newerFields(r, fmt.Sprintf("%s.replaces[%d]", at, i), nil); err != nil {
				return nil, err
			}
			m := mapping()
			add(m, "name", str(r.GetName()))
			list.Content = append(list.Content, m)
		}
		add(n, "replaces", list)
	}
	return n, nil
}

// unitName is a unit's name as envoyproxy/ratelimit's newer proto names it (whose
// numbers limits.Unit shares: WEEK, MONTH and YEAR are unknown to this module's), or
// its number.
func unitName(u rlconf.RateLimitUnit) string {
	if u >= 0 && u <= rlconf.RateLimitUnit(limits.Week) {
		return limits.Unit(u).String()
	}
	return strconv.Itoa(int(u))
}

// The fields of envoyproxy/ratelimit's RateLimitDescriptor that this module's proto
// lacks.
const (
	descriptorQuotaMode protowire.Number = 7 // bool
	descriptorMetadata  protowire.Number = 8 // google.protobuf.Struct: not used, as a file's metadata is not
)

// newerFields reads m's unknown fields: a varint field of bools into its bool, a field
// of skip passed over, and any other an error naming it.
func newerFields(m proto.Message, at string, bools map[protowire.Number]*bool, skip ...protowire.Number) error {
	b := m.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%s: %v", orTop(at), protowire.ParseError(n))
		}
		b = b[n:]
		v, vn := protowire.ConsumeVarint(b)
		switch {
		case bools[num] != nil && typ == protowire.VarintType && vn >= 0:
			*bools[num] = v != 0
		case slices.Contains(skip, num):
		default:
			return fmt.Errorf("%s: field %d is not one leapcount knows", orTop(at), num)
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return fmt.Errorf("%s: %v", orTop(at), protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

func orTop(at string) string {
	if at == "" {
		return "(the RateLimitConfig)"
	}
	return at
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func boolean(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}

func mapping() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }

// add appends key: v to the mapping m.
func add(m *yaml.Node, key string, v *yaml.Node) { m.Content = append(m.Content, str(key), v) }
