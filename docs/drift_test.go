// Package docs holds no code: its test keeps the repository's Markdown from drifting
// from the code. For README.md, CONTRACT.md, BENCHMARKS.md and every docs/*.md it checks
// that each relative link resolves (the file exists, and its #anchor names a heading
// there) and that each backticked repository path exists; for docs/architecture.md,
// that each Go identifier it names in backticks is declared in the code.
package docs

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, seen from this package's directory.
const root = ".."

// checkedDocs are the documents checked, relative to root.
func checkedDocs(t *testing.T) []string {
	docs := []string{"README.md", "CONTRACT.md", "BENCHMARKS.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range more {
		docs = append(docs, path.Join("docs", filepath.Base(m)))
	}
	return docs
}

// identifiersChecked are the documents whose backticked Go identifiers must exist.
var identifiersChecked = map[string]bool{"docs/architecture.md": true}

func TestDocsDoNotDrift(t *testing.T) {
	code := parseCode(t)
	docs := checkedDocs(t)
	headings := map[string]map[string]bool{} // by path relative to root
	for _, d := range docs {
		if _, err := os.Stat(filepath.Join(root, d)); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	for _, d := range docs {
		doc := readDoc(t, d)
		if doc == nil {
			continue
		}
		for _, p := range doc.problems(headings, code, identifiersChecked[d]) {
			t.Error(p)
		}
	}
}

// Every directory of Go files (a package, tests only or not, as go list ./... and the
// build-tagged suites have them) is named in architecture.md's layout, in backticks: a
// package added, moved or removed shows there.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	d := readDoc(t, "docs/architecture.md")
	if d == nil {
		return
	}
	named := map[string]bool{}
	for _, l := range d.lines {
		for _, m := range codeSpan.FindAllStringSubmatch(l.text, -1) {
			named[strings.TrimSuffix(m[1], "/")] = true
		}
	}
	dirs := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if p != root && skipDir(e.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			dirs[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		if !named[dir] {
			t.Errorf("docs/architecture.md: package directory %s is not named in the layout", dir)
		}
	}
}

// skipDir reports whether a directory of that name holds no package of the module.
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "bin" || name == "node_modules"
}

// The check's own rules, on made-up documents: a broken link, a heading that is not
// there, a path and an identifier that do not exist are each reported with the doc's
// name and line.
func TestDriftCheckCatchesDrift(t *testing.T) {
	code := parseCode(t)
	dir := t.TempDir()
	bad := "# Title\n\n## A heading, with `code` & punctuation\n\n" +
		"[ok](#a-heading-with-code--punctuation) [ok](../README.md#quickstart) [ok](../owner/)\n" +
		"[broken](no-such-file.md) [no anchor](../README.md#no-such-heading) [self](#nowhere)\n" +
		"`owner/record.go` `owner/no_such_file.go` `owner/` `nosuchdir/x` `cmd/node`\n" +
		"`owner.Step` `owner.NoSuchThing` `Record.verdict` `Owner.step` `owner/state.go` `stateStep` `owner/state.go` `noSuchFunc`\n" +
		"`route.Router.Decide` `route.Router.NoSuch` `time.Duration` `SW.INCR` `maxUnwritten` `noSuchCamelCase`\n" +
		"```\n[in a fence](nowhere.md) `owner/nowhere.go`\n```\n"
	name := filepath.Join(dir, "bad.md")
	if err := os.WriteFile(name, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := parseDoc("docs/bad.md", name)
	if err != nil {
		t.Fatal(err)
	}
	got := doc.problems(map[string]map[string]bool{}, code, true)
	want := []string{
		"docs/bad.md:6: link no-such-file.md: ",
		"docs/bad.md:6: link ../README.md#no-such-heading: README.md has no heading #no-such-heading",
		"docs/bad.md:6: link #nowhere: docs/bad.md has no heading #nowhere",
		"docs/bad.md:7: path `owner/no_such_file.go` does not exist",
		"docs/bad.md:8: `owner.NoSuchThing`",
		"docs/bad.md:8: `owner/state.go` `noSuchFunc`",
		"docs/bad.md:9: `route.Router.NoSuch`",
		"docs/bad.md:9: `noSuchCamelCase`",
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("not reported: %q", w)
		}
	}
	for _, g := range got {
		if !slices.ContainsFunc(want, func(w string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("reported, and should not be: %s", g)
		}
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Clocks":                        "clocks",
		"Redis persistence and handoff": "redis-persistence-and-handoff",
		"Use with Envoy (gRPC rate limit service)": "use-with-envoy-grpc-rate-limit-service",
		"The `SW.INCR` path, local":                "the-swincr-path-local",
		"A [link](x.md) in it":                     "a-link-in-it",
		"snake_case and a-dash":                    "snake_case-and-a-dash",
		"Step 1: read; 2. write":                   "step-1-read-2-write",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// A doc is one Markdown document, read.
type doc struct {
	name  string // relative to root, with '/'
	lines []line // outside fenced code blocks
	heads map[string]bool
}

type line struct {
	n    int
	text string
}

func readDoc(t *testing.T, name string) *doc {
	d, err := parseDoc(name, filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return nil
	}
	return d
}

// parseDoc reads the document name (relative to root) from file.
func parseDoc(name, file string) (*doc, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &doc{name: name, heads: map[string]bool{}}
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fence := ""
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if h, ok := heading(text); ok {
			s := slug(h)
			if k := seen[s]; k > 0 {
				d.heads[s+"-"+strconv.Itoa(k)] = true
			} else {
				d.heads[s] = true
			}
			seen[s]++
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(text, -1) {
			d.heads[m[1]] = true
		}
		d.lines = append(d.lines, line{n, text})
	}
	return d, sc.Err()
}

var (
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	codeSpan   = regexp.MustCompile("`([^`]+)`")
	mdLink     = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)`)
	htmlLink   = regexp.MustCompile(`(?:src|href)="([^"]+)"`)
	lineRef    = regexp.MustCompile(`:\d+(?:-\d+)?$`)
	repoPath   = regexp.MustCompile(`^[A-Za-z0-9_.\-/*]+$`)
	goIdent    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	goSelector = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$`)
	linkText   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// heading returns the text of an ATX heading line.
func heading(text string) (string, bool) {
	m := atxHeading.FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// slug is GitHub's anchor of a heading: its text as rendered (links as their text),
// lower case, every character but letters, digits, '-', '_' and spaces dropped, and
// spaces turned to '-'.
func slug(h string) string {
	h = linkText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.TrimSpace(strings.ToLower(h)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// problems lists what in d does not resolve: links, paths and (with idents) Go
// identifiers. headings caches other documents' headings.
func (d *doc) problems(headings map[string]map[string]bool, code *codeIndex, idents bool) []string {
	var out []string
	report := func(n int, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s:%d: ", d.name, n)+fmt.Sprintf(format, args...))
	}
	headings[d.name] = d.heads
	dir := path.Dir(d.name)
	for _, l := range d.lines {
		prose := codeSpan.ReplaceAllString(l.text, "")
		var targets []string
		for _, m := range mdLink.FindAllStringSubmatch(prose, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(prose); m != nil {
			targets = append(targets, m[1])
		}
		for _, m := range htmlLink.FindAllStringSubmatch(prose, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if err := d.checkLink(dir, target, headings); err != "" {
				report(l.n, "link %s: %s", target, err)
			}
		}
		spans := codeSpan.FindAllStringSubmatchIndex(l.text, -1)
		paired := false // the span is the name of a `file.go` `name` pair, checked with it
		for i, m := range spans {
			span := l.text[m[2]:m[3]]
			if paired {
				paired = false
				continue
			}
			if err := checkPath(dir, span); err != "" {
				report(l.n, "path `%s` %s", span, err)
			}
			if !idents {
				continue
			}
			// `file.go` `name`: name is declared in that file.
			if strings.HasSuffix(span, ".go") && i+1 < len(spans) {
				between := strings.TrimSpace(l.text[m[1]:spans[i+1][0]])
				next := l.text[spans[i+1][2]:spans[i+1][3]]
				if between == "" && goSelectorOrIdent(next) {
					if err := checkPath(dir, span); err == "" {
						if err := code.inFile(span, strings.TrimSuffix(next, "()")); err != "" {
							report(l.n, "`%s` `%s`: %s", span, next, err)
						}
					}
					paired = true
					continue
				}
			}
			if err := code.check(strings.TrimSuffix(span, "()")); err != "" {
				report(l.n, "`%s`: %s", span, err)
			}
		}
	}
	return out
}

func goSelectorOrIdent(s string) bool {
	s = strings.TrimSuffix(s, "()")
	return goIdent.MatchString(s) || goSelector.MatchString(s)
}

// checkLink checks one link target of a document in dir; "" when it resolves.
func (d *doc) checkLink(dir, target string, headings map[string]map[string]bool) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	name := d.name
	if file != "" {
		if strings.HasPrefix(file, "/") {
			return "an absolute path: links must be relative to the document"
		}
		name = path.Clean(path.Join(dir, file))
		info, err := os.Stat(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return fmt.Sprintf("%s does not exist", name)
		}
		if info.IsDir() || anchor == "" || !strings.HasSuffix(name, ".md") {
			return ""
		}
	}
	if anchor == "" {
		return ""
	}
	heads, ok := headings[name]
	if !ok {
		other, err := parseDoc(name, filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return fmt.Sprintf("%s cannot be read: %v", name, err)
		}
		heads = other.heads
		headings[name] = heads
	}
	if !heads[anchor] {
		return fmt.Sprintf("%s has no heading #%s", name, anchor)
	}
	return ""
}

// checkPath checks a backticked span that looks like a repository path: it contains
// '/' and ends in .go, .md, .yaml, .yml, .sh or .lua, or begins with a top-level
// directory of the repository. It resolves from the repository's root or from the
// document's directory; "" when it does (or when the span is not such a path).
func checkPath(dir, span string) string {
	p := lineRef.ReplaceAllString(span, "")
	if !strings.Contains(p, "/") || !repoPath.MatchString(p) || strings.HasPrefix(p, "/") || strings.Contains(p, "//") {
		return ""
	}
	first, _, _ := strings.Cut(p, "/")
	looksLikeFile := false
	for _, ext := range []string{".go", ".md", ".yaml", ".yml", ".sh", ".lua"} {
		looksLikeFile = looksLikeFile || strings.HasSuffix(p, ext)
	}
	if !looksLikeFile && !topLevelDir(first) {
		return ""
	}
	for _, base := range []string{".", dir} {
		full := filepath.Join(root, filepath.FromSlash(base), filepath.FromSlash(p))
		if strings.Contains(p, "*") {
			if m, _ := filepath.Glob(full); len(m) > 0 {
				return ""
			}
			continue
		}
		if _, err := os.Stat(full); err == nil {
			return ""
		}
	}
	return "does not exist"
}

// topLevelDir reports whether name is a directory at the repository's top that is part
// of it (not a build output that .gitignore leaves out, such as bin/).
func topLevelDir(name string) bool {
	if name == "" || name == "." || name == ".." || name == "bin" {
		return false
	}
	info, err := os.Stat(filepath.Join(root, name))
	return err == nil && info.IsDir()
}

// codeIndex is what the repository's non-test Go code declares.
type codeIndex struct {
	pkgs    map[string]map[string]bool // by package directory's last element: names, Type.Member
	files   map[string]map[string]bool // by path relative to root: names, Type.Member
	members map[string]map[string]bool // by type name, any package: its methods and fields
	all     map[string]bool            // every name declared: top level, methods, fields
	imports map[string]bool            // last elements of the import paths used
}

func parseCode(t *testing.T) *codeIndex {
	t.Helper()
	c := &codeIndex{pkgs: map[string]map[string]bool{}, files: map[string]map[string]bool{},
		members: map[string]map[string]bool{}, all: map[string]bool{}, imports: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if p != root && skipDir(name) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		c.add(filepath.ToSlash(rel), f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *codeIndex) add(rel string, f *ast.File) {
	pkg := path.Base(path.Dir(rel))
	if path.Dir(rel) == "." {
		pkg = "."
	}
	names := c.pkgs[pkg]
	if names == nil {
		names = map[string]bool{}
		c.pkgs[pkg] = names
	}
	inFile := map[string]bool{}
	c.files[rel] = inFile
	note := func(name string) {
		names[name], inFile[name], c.all[name] = true, true, true
	}
	member := func(typ, name string) {
		names[typ+"."+name], inFile[typ+"."+name], c.all[name] = true, true, true
		if c.members[typ] == nil {
			c.members[typ] = map[string]bool{}
		}
		c.members[typ][name] = true
	}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		c.imports[path.Base(p)] = true
		if imp.Name != nil {
			c.imports[imp.Name.Name] = true
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				note(d.Name.Name)
				continue
			}
			member(recvType(d.Recv.List[0].Type), d.Name.Name)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					note(s.Name.Name)
					c.typeMembers(s.Name.Name, s.Type, member)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						note(n.Name)
					}
				}
			}
		}
	}
}

// typeMembers notes a type's fields (struct) or methods (interface).
func (c *codeIndex) typeMembers(typ string, expr ast.Expr, member func(typ, name string)) {
	var fields *ast.FieldList
	switch x := expr.(type) {
	case *ast.StructType:
		fields = x.Fields
	case *ast.InterfaceType:
		fields = x.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			member(typ, n.Name)
		}
		if len(f.Names) == 0 { // embedded: its type's name is the field's
			if name := recvType(f.Type); name != "" {
				member(typ, name)
			}
		}
	}
}

// recvType is the name of a receiver's (or an embedded field's) type.
func recvType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.SelectorExpr:
			return x.Sel.Name
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// check checks a backticked span of architecture.md that may name Go code: a.B or
// a.B.C (package a's B, or B.C; or type a's member B), or a lone mixedCase identifier
// (declared somewhere). "" when it is declared, or not a Go name at all.
func (c *codeIndex) check(span string) string {
	if strings.Contains(span, "/") {
		return ""
	}
	for _, ext := range []string{".go", ".md", ".mod", ".sum", ".yaml", ".yml", ".sh", ".lua", ".json", ".png", ".html", ".txt", ".proto"} {
		if strings.HasSuffix(span, ext) {
			return ""
		}
	}
	if goIdent.MatchString(span) {
		if mixedCase(span) && !c.all[span] {
			return "declared nowhere in the code"
		}
		return ""
	}
	if !goSelector.MatchString(span) {
		return ""
	}
	parts := strings.Split(span, ".")
	a, b := parts[0], parts[1]
	names, isPkg := c.pkgs[a]
	members, isType := c.members[a]
	switch {
	case isPkg || isType:
	case c.imports[a]:
		return "" // another module's package: not checked
	case strings.ToUpper(a) == a:
		return "" // SW.INCR and the like
	default:
		return fmt.Sprintf("no package or type %s in the code", a)
	}
	if isPkg {
		ok := names[b]
		if len(parts) == 2 && !ok {
			ok = methodNamed(names, b)
		}
		if len(parts) > 2 {
			ok = names[b+"."+parts[2]]
		}
		if ok {
			return ""
		}
	}
	if isType && members[b] {
		return ""
	}
	if isPkg {
		if len(parts) > 2 {
			return fmt.Sprintf("package %s has no %s.%s", a, b, parts[2])
		}
		return fmt.Sprintf("package %s declares no %s", a, b)
	}
	return fmt.Sprintf("type %s has no method or field %s", a, b)
}

// inFile checks that name (or Type.Member) is declared in file (a path from the root,
// or a file name that some package's file has).
func (c *codeIndex) inFile(file, name string) string {
	var matched []string
	for rel := range c.files {
		if rel == file || !strings.Contains(file, "/") && path.Base(rel) == file {
			matched = append(matched, rel)
		}
	}
	if len(matched) == 0 {
		return "no such Go file"
	}
	for _, rel := range matched {
		decls := c.files[rel]
		if decls[name] || !strings.Contains(name, ".") && methodNamed(decls, name) {
			return ""
		}
	}
	return fmt.Sprintf("not declared in %s", strings.Join(matched, ", "))
}

// methodNamed reports whether names holds a Type.name.
func methodNamed(names map[string]bool, name string) bool {
	for n := range names {
		if strings.HasSuffix(n, "."+name) {
			return true
		}
	}
	return false
}

// mixedCase reports whether an identifier mixes lower and upper case letters
// (stateStep, maxUnwritten, Owned): a Go name rather than a word or an acronym.
func mixedCase(s string) bool {
	var lower, upper bool
	for _, r := range s {
		lower = lower || unicode.IsLower(r)
		upper = upper || unicode.IsUpper(r)
	}
	return lower && upper
}
