package limits

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// File is one config file, parsed and checked on its own (Build checks what spans
// files: domains and keys configured twice).
type File struct {
	Name        string
	Domain      string
	Descriptors []Descriptor
	// DeniedConsumesNothing (leapcount: denied_consumes_nothing) makes a request that
	// one descriptor denies count in none of its others.
	DeniedConsumesNothing bool
}

// Descriptor is one configured descriptor.
type Descriptor struct {
	Key, Value     string
	Rule           *Rule // nil: no limit at this level
	ValueToMetric  bool
	ShareThreshold bool
	Descriptors    []Descriptor
	Line           int
}

// Error is a config error at a place in a file.
type Error struct {
	File string
	Line int // 0: the file as a whole
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Parse reads one config file named name (for errors and rules' places).
func Parse(name string, data []byte) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, syntaxError(name, err)
	}
	p := parser{file: name}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, &Error{File: name, Msg: "config file cannot have empty domain"}
	}
	f := &File{Name: name}
	err := p.mapping(doc.Content[0], func(key string, v *yaml.Node) error {
		switch key {
		case "domain":
			return p.str(v, &f.Domain)
		case "descriptors":
			return p.descriptors(v, &f.Descriptors)
		case "denied_consumes_nothing":
			return p.boolean(v, &f.DeniedConsumesNothing)
		}
		return p.unknown(key, v, "domain, descriptors, denied_consumes_nothing")
	})
	if err != nil {
		return nil, err
	}
	if f.Domain == "" {
		return nil, p.errAt(doc.Content[0], "config file cannot have empty domain")
	}
	return f, nil
}

// syntaxError names the line of a YAML syntax error as every other error does
// (file:line: what), where the YAML library says "yaml: line N: what".
func syntaxError(name string, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, what, ok := strings.Cut(rest, ": "); ok {
			if line, err := strconv.Atoi(num); err == nil {
				return &Error{File: name, Line: line, Msg: what}
			}
		}
	}
	return &Error{File: name, Msg: msg}
}

type parser struct{ file string }

func (p *parser) errAt(n *yaml.Node, format string, args ...any) error {
	return &Error{File: p.file, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) unknown(key string, v *yaml.Node, known string) error {
	return p.errAt(v, "unknown field %q here (known: %s)", key, known)
}

// mapping calls f for each key of a mapping node, in order; keys must be strings, once.
func (p *parser) mapping(n *yaml.Node, f func(key string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.errAt(n, "want a mapping, got %s", kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return p.errAt(k, "key %q is not a string", k.Value)
		}
		if seen[k.Value] {
			return p.errAt(k, "field %q given twice", k.Value)
		}
		seen[k.Value] = true
		if err := f(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("%q", n.Value)
}

// str reads a scalar as a string (a number's text as written); null is empty, as in
// envoyproxy/ratelimit.
func (p *parser) str(n *yaml.Node, out *string) error {
	switch {
	case n.Kind != yaml.ScalarNode:
		return p.errAt(n, "want a string, got %s", kindName(n))
	case n.Tag == "!!null":
		*out = ""
	default:
		*out = n.Value
	}
	return nil
}

func (p *parser) boolean(n *yaml.Node, out *bool) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return p.errAt(n, "want true or false, got %s", kindName(n))
	}
	return n.Decode(out)
}

func (p *parser) uint32(n *yaml.Node, out *uint32) error {
	v, err := strconv.ParseUint(n.Value, 10, 32)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil {
		return p.errAt(n, "want a whole number from 0 to %d, got %s", uint32(math.MaxUint32), kindName(n))
	}
	*out = uint32(v)
	return nil
}

// list calls f for each item of a sequence node, each a mapping; null is an empty list.
func (p *parser) list(n *yaml.Node, f func(item *yaml.Node) error) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return p.errAt(n, "want a list, got %s", kindName(n))
	}
	for _, it := range n.Content {
		if it.Kind != yaml.MappingNode {
			return p.errAt(it, "list holds %s, not a mapping", kindName(it))
		}
		if err := f(it); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) descriptors(n *yaml.Node, out *[]Descriptor) error {
	return p.list(n, func(it *yaml.Node) error {
		d, err := p.descriptor(it)
		if err == nil {
			*out = append(*out, d)
		}
		return err
	})
}

const descriptorFields = "key, value, rate_limit, rate_limits, descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, metadata"

func (p *parser) descriptor(n *yaml.Node) (Descriptor, error) {
	d := Descriptor{Line: n.Line}
	var limits []*yaml.Node
	var shadow, quota, detailed bool
	err := p.mapping(n, func(key string, v *yaml.Node) error {
		switch key {
		case "key":
			return p.str(v, &d.Key)
		case "value":
			return p.str(v, &d.Value)
		case "rate_limit":
			limits = append(limits, v)
			return nil
		case "rate_limits": // leapcount: several limits for one descriptor
			return p.list(v, func(it *yaml.Node) error { limits = append(limits, it); return nil })
		case "descriptors":
			return p.descriptors(v, &d.Descriptors)
		case "shadow_mode":
			return p.boolean(v, &shadow)
		case "quota_mode":
			return p.boolean(v, &quota)
		case "detailed_metric":
			return p.boolean(v, &detailed)
		case "value_to_metric":
			return p.boolean(v, &d.ValueToMetric)
		case "share_threshold":
			return p.boolean(v, &d.ShareThreshold)
		case "metadata":
			return nil // arbitrary: handed to Envoy by envoyproxy/ratelimit, not used here
		}
		return p.unknown(key, v, descriptorFields)
	})
	switch {
	case err != nil:
		return d, err
	case d.Key == "":
		return d, p.errAt(n, "descriptor has empty key")
	case d.ShareThreshold && !strings.Contains(d.Value, "*"):
		return d, p.errAt(n, "share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", compositeKey(d.Key, d.Value))
	case len(limits) == 0:
		return d, nil
	}
	r := &Rule{ShadowMode: shadow, QuotaMode: quota, DetailedMetric: detailed, File: p.file, Line: n.Line}
	for i, ln := range limits {
		if err := p.rateLimit(ln, r, i == 0); err != nil {
			return d, err
		}
	}
	if r.Unlimited && len(limits) > 1 {
		return d, p.errAt(limits[1], "an unlimited descriptor has no other limits")
	}
	d.Rule = r
	return d, nil
}

const rateLimitFields = "unit, requests_per_unit, unlimited, name, replaces, window, buckets"

// rateLimit reads one rate_limit into r: its limit, and (first only) the rule's name,
// replaces and unlimited.
func (p *parser) rateLimit(n *yaml.Node, r *Rule, first bool) error {
	var l Limit
	var unit, window string
	var unlimited bool
	var replaces []string
	err := p.mapping(n, func(key string, v *yaml.Node) error {
		switch key {
		case "unit":
			return p.str(v, &unit)
		case "requests_per_unit":
			return p.uint32(v, &l.RequestsPerUnit)
		case "unlimited":
			return p.boolean(v, &unlimited)
		case "name":
			return p.str(v, &l.Name)
		case "replaces":
			return p.list(v, func(it *yaml.Node) error {
				var name string
				err := p.mapping(it, func(k string, v *yaml.Node) error {
					if k != "name" {
						return p.unknown(k, v, "name")
					}
					return p.str(v, &name)
				})
				switch {
				case err != nil:
					return err
				case name == "":
					return p.errAt(it, "should not have an empty replaces entry")
				}
				replaces = append(replaces, name)
				return nil
			})
		case "window": // leapcount: any length
			return p.str(v, &window)
		case "buckets": // leapcount: how finely the window slides
			return p.buckets(v, &l.Buckets)
		}
		return p.unknown(key, v, rateLimitFields)
	})
	if err != nil {
		return err
	}
	u, validUnit := parseUnit(unit)
	switch {
	case unlimited && (validUnit || window != ""):
		return p.errAt(n, "should not specify rate limit unit when unlimited")
	case unlimited:
		r.Unlimited = true
	case unit != "" && !validUnit || unit == "" && window == "":
		return p.errAt(n, "invalid rate limit unit '%s'", unit)
	default:
		l.Unit, l.Window = u, u.Duration()
		if window != "" {
			d, err := time.ParseDuration(window)
			if err != nil || d < time.Millisecond {
				return p.errAt(n, "window %q is not a duration of at least 1ms (such as 90s or 36h)", window)
			}
			if validUnit && d != l.Window {
				return p.errAt(n, "window %s and unit %s disagree: give one", d, u)
			}
			l.Window = d
			if !validUnit {
				l.Unit = unitOf(d) // what answers name it by: UNKNOWN unless it is one unit
			}
		}
		r.Limits = append(r.Limits, l)
	}
	for _, name := range replaces {
		if name == l.Name {
			return p.errAt(n, "replaces should not contain name of same descriptor")
		}
	}
	if first {
		r.Replaces = replaces
	} else if len(replaces) > 0 {
		return p.errAt(n, "replaces belongs to a descriptor's first limit")
	}
	return nil
}

// maxBuckets bounds a window's buckets: each counter keeps that many.
const maxBuckets = 3600

func (p *parser) buckets(n *yaml.Node, out *int) error {
	v, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil || v < 1 || v > maxBuckets {
		return p.errAt(n, "buckets must be a whole number from 1 to %d, got %s", maxBuckets, kindName(n))
	}
	*out = v
	return nil
}

func compositeKey(key, value string) string {
	if value == "" {
		return key
	}
	return key + "_" + value
}
