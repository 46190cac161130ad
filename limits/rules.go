package limits

import (
	"strings"
	"time"
)

// Limit is one limit of a rule: at most RequestsPerUnit in each Window.
type Limit struct {
	Name            string
	RequestsPerUnit uint32
	Unit            Unit          // UnitUnknown when only window was given
	Window          time.Duration // Unit's length, or the window extension's
	Buckets         int           // how finely the window slides (0: the server's default)
}

// Rule is the rule a descriptor matched.
type Rule struct {
	// Key names the rule as envoyproxy/ratelimit's stats do: the domain and the
	// configured key (and value) of each level, joined by dots ("d.k1_v1.k2").
	Key            string
	Domain         string
	Limits         []Limit // none when Unlimited
	Unlimited      bool
	ShadowMode     bool
	QuotaMode      bool
	DetailedMetric bool
	ValueToMetric  bool // a level on its path has value_to_metric: its stats are named by MetricKey
	Replaces       []string
	File           string // where it was configured
	Line           int
}

// Entry is one entry of a request's descriptor.
type Entry struct{ Key, Value string }

// Rules are the rules of every domain loaded. They never change: a reload builds new
// Rules.
type Rules struct {
	domains       map[string]*level
	consumeNoDeny map[string]bool // domains whose denied requests count nothing
}

// DeniedConsumesNothing reports whether a request of domain that one descriptor denies
// counts in none of its others (denied_consumes_nothing in any of its files).
func (rs *Rules) DeniedConsumesNothing(domain string) bool { return rs.consumeNoDeny[domain] }

// level is one level of a domain's descriptor tree.
type level struct {
	next      map[string]*level // by "key" or "key_value"
	wildcards []wildcard        // values with '*', in the file's order
	rule      *Rule
	shared    string // share_threshold: the wildcard value every value it matches counts as
	// valueToMetric: stats name this level by the request's value when it matched by
	// wildcard or by key alone (value_to_metric).
	valueToMetric bool
}

type wildcard struct {
	key   string   // "key_value" as configured
	parts []string // key split at each '*'
}

// Domains lists the domains configured.
func (rs *Rules) Domains() []string {
	out := make([]string, 0, len(rs.domains))
	for d := range rs.domains {
		out = append(out, d)
	}
	return out
}

// HasDomain reports whether domain is configured.
func (rs *Rules) HasDomain(domain string) bool {
	_, ok := rs.domains[domain]
	return ok
}

// Lookup returns the rule a request's descriptor matches in domain, or nil (no limit):
// at each level the entry's key and value, else the first wildcard value that matches,
// else the key alone; a rule applies only if it is at the descriptor's last entry.
// shared holds, per entry, the wildcard value it counts as (share_threshold), or ""
// where the entry counts by its own value; nil when none is shared.
func (rs *Rules) Lookup(domain string, entries []Entry) (rule *Rule, shared []string) {
	cur := rs.domains[domain]
	if cur == nil {
		return nil, nil
	}
	for i, e := range entries {
		next, wild := cur.step(e)
		if wild != "" && next.shared != "" {
			if shared == nil {
				shared = make([]string, len(entries))
			}
			shared[i] = next.shared
		}
		if next == nil {
			return nil, nil
		}
		if next.rule != nil && i == len(entries)-1 {
			rule = next.rule
		}
		if len(next.next) == 0 {
			break
		}
		cur = next
	}
	if rule == nil {
		return nil, nil
	}
	return rule, shared
}

// step is the level an entry leads to from lv: its key and value, else the first
// wildcard value that matches (wild: that "key_value" as configured), else its key
// alone; nil when none does.
func (lv *level) step(e Entry) (next *level, wild string) {
	kv := e.Key + "_" + e.Value
	if next = lv.next[kv]; next != nil {
		return next, ""
	}
	for _, w := range lv.wildcards {
		if matchWildcard(w.parts, kv) {
			return lv.next[w.key], w.key
		}
	}
	return lv.next[e.Key], ""
}

// MetricKey is the stats name of a request's descriptor whose rule has ValueToMetric,
// as envoyproxy/ratelimit names it: at each level the value configured, or, where that
// level has value_to_metric and matched by wildcard or by key alone, the request's
// own value (share_threshold keeps its pattern).
func (rs *Rules) MetricKey(domain string, entries []Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	cur := rs.domains[domain]
	for _, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
		var next *level
		var wild string
		if cur != nil {
			next, wild = cur.step(e)
		}
		if next == nil {
			cur = nil
			continue
		}
		value := ""
		switch {
		case wild != "" && next.shared != "":
			value = next.shared
		case wild != "" && !next.valueToMetric:
			value = strings.TrimPrefix(wild, e.Key+"_")
		case wild != "" || next.valueToMetric || next == cur.next[e.Key+"_"+e.Value]:
			value = e.Value
		}
		if value != "" {
			b.WriteByte('_')
			b.WriteString(value)
		}
		cur = next
	}
	return b.String()
}

// Each calls f for every rule, in no particular order.
func (rs *Rules) Each(f func(*Rule)) {
	for _, top := range rs.domains {
		top.each(f)
	}
}

func (lv *level) each(f func(*Rule)) {
	if lv.rule != nil {
		f(lv.rule)
	}
	for _, n := range lv.next {
		n.each(f)
	}
}

// matchWildcard reports whether s matches a pattern split at its '*'s: each '*' stands
// for any run of characters, none included.
func matchWildcard(parts []string, s string) bool {
	if len(parts) == 1 {
		return parts[0] == s
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	rest := s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}
