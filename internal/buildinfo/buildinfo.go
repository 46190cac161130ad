// Package buildinfo says which leapcount a binary is: its version, the commit it was
// built from and the Go that built it, read from the build information Go stamps into
// every binary (the version can be set at link time with
// -ldflags "-X github.com/leapcount/leapcount/internal/buildinfo.version=v1.2.3").
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version, when set at link time, beats the module version Go stamps.
var version string

// Info is what a binary knows of its own build.
type Info struct {
	Version   string `json:"version"`          // a release, Go's pseudo-version of the commit, or "(devel)"
	Commit    string `json:"commit,omitempty"` // the VCS revision, when the build had one
	Time      string `json:"time,omitempty"`   // the commit's time
	Modified  bool   `json:"modified"`         // built from a tree with uncommitted changes
	GoVersion string `json:"go"`
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// Read returns this binary's Info.
func Read() Info {
	i := Info{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if v := bi.Main.Version; v != "" {
			i.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Commit = s.Value
			case "vcs.time":
				i.Time = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		i.Version = version
	}
	return i
}

// ShortCommit is the commit's first 12 characters ("" when unknown).
func (i Info) ShortCommit() string {
	if len(i.Commit) > 12 {
		return i.Commit[:12]
	}
	return i.Commit
}

// String is the one line `leapcount-node version` prints.
func (i Info) String() string {
	s := "leapcount " + i.Version
	if i.Commit != "" {
		s += " commit " + i.ShortCommit()
		if i.Modified {
			s += " (modified)"
		}
	}
	if i.Time != "" {
		s += " " + i.Time
	}
	return fmt.Sprintf("%s %s %s", s, i.GoVersion, i.Platform)
}
