package limits

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Build makes the rules of files. A domain in two files is an error unless merge is
// set (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG): then their descriptors join, and a
// key configured twice at one level is still an error.
func Build(files []*File, merge bool) (*Rules, error) {
	rs := &Rules{domains: map[string]*level{}, consumeNoDeny: map[string]bool{}}
	for _, f := range files {
		top, ok := rs.domains[f.Domain]
		switch {
		case ok && !merge:
			return nil, &Error{File: f.Name, Msg: fmt.Sprintf("duplicate domain '%s' in config file", f.Domain)}
		case !ok:
			top = &level{next: map[string]*level{}}
			rs.domains[f.Domain] = top
		}
		if f.DeniedConsumesNothing {
			rs.consumeNoDeny[f.Domain] = true
		}
		if err := top.add(f, f.Domain, f.Domain, f.Descriptors, false); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// add adds ds below lv; valueToMetric is whether a level above has value_to_metric.
func (lv *level) add(f *File, domain, parent string, ds []Descriptor, valueToMetric bool) error {
	for _, d := range ds {
		key := compositeKey(d.Key, d.Value)
		full := parent + "." + key
		if _, dup := lv.next[key]; dup {
			return &Error{File: f.Name, Line: d.Line, Msg: fmt.Sprintf("duplicate descriptor composite key '%s'", full)}
		}
		next := &level{next: map[string]*level{}, valueToMetric: d.ValueToMetric}
		if d.ShareThreshold {
			next.shared = d.Value
		}
		if d.Rule != nil {
			r := *d.Rule
			r.Key, r.Domain = full, domain
			r.ValueToMetric = valueToMetric || d.ValueToMetric
			next.rule = &r
		}
		if strings.Contains(key, "*") {
			lv.wildcards = append(lv.wildcards, wildcard{key: key, parts: strings.Split(key, "*")})
		}
		if err := next.add(f, domain, full, d.Descriptors, valueToMetric || d.ValueToMetric); err != nil {
			return err
		}
		lv.next[key] = next
	}
	return nil
}

// LoadPath reads the config at path: one file, or every .yaml and .yml file of a
// directory (in name order; hidden entries left out, as a Kubernetes ConfigMap's
// ..data link and its timestamped directory are), and builds their rules. It returns
// the files read.
func LoadPath(path string, merge bool) (*Rules, []string, error) {
	names, err := configFiles(path)
	if err != nil {
		return nil, nil, err
	}
	files := make([]*File, 0, len(names))
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, names, err
		}
		f, err := Parse(name, data)
		if err != nil {
			return nil, names, err
		}
		files = append(files, f)
	}
	rs, err := Build(files, merge)
	return rs, names, err
}

func configFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		full := filepath.Join(path, n)
		if st, err := os.Stat(full); err != nil || st.IsDir() {
			continue // a dangling link, or a directory named like a file
		}
		out = append(out, full)
	}
	slices.Sort(out)
	return out, nil
}
