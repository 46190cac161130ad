package xdsconfig

import (
	"errors"
	"fmt"

	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/leapcount/leapcount/limits"
)

// converted is one response's resources as files, and where each line of each
// file's rendering comes from, to name the field at fault in an error in place of a
// line no one can see.
type converted struct {
	files  []*limits.File
	fields map[string]map[int]string // by file name: line → the field on it
}

// convert reads resources as files, each named after its resource
// (`RateLimitConfig "name"`).
func convert(resources []*anypb.Any) (*converted, error) {
	c := &converted{fields: make(map[string]map[int]string, len(resources))}
	for i, res := range resources {
		var pb rlconf.RateLimitConfig
		if err := res.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("resource %d: %w", i, err)
		}
		name := fmt.Sprintf("RateLimitConfig %q", pb.GetName())
		if _, dup := c.fields[name]; dup {
			name = fmt.Sprintf("%s (resource %d)", name, i)
		}
		doc, err := render(&pb)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		data, err := yaml.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		c.fields[name] = fieldLines(data)
		f, err := limits.Parse(name, data)
		if err != nil {
			return nil, c.explain(err)
		}
		c.files = append(c.files, f)
	}
	return c, nil
}

// explain puts, in an error of package limits about one of c's files, the field at
// fault where the line of its rendering was.
func (c *converted) explain(err error) error {
	var le *limits.Error
	if !errors.As(err, &le) {
		return err
	}
	lines, ok := c.fields[le.File]
	if !ok {
		return err
	}
	if at := lines[le.Line]; at != "" {
		return fmt.Errorf("%s: %s: %s", le.File, at, le.Msg)
	}
	return fmt.Errorf("%s: %s", le.File, le.Msg)
}

// fieldLines maps each line of a rendering to the first field on it, as a path
// ("descriptors[0].rate_limit.unit").
func fieldLines(data []byte) map[int]string {
	var doc yaml.Node
	out := map[int]string{}
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return out
	}
	var walk func(n *yaml.Node, at string)
	walk = func(n *yaml.Node, at string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if at != "" {
					p = at + "." + k.Value
				}
				if _, ok := out[k.Line]; !ok {
					out[k.Line] = p
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, it := range n.Content {
				walk(it, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	}
	walk(doc.Content[0], "")
	return out
}
