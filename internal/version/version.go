// Package version says which release of netwheel a binary was built from,
// for the -version flag of cmd/echo and loadtest.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Release is the version of this source tree, as CHANGELOG.md names it.
const Release = "v0.1.0"

// String returns a one-line description of the binary named name: the
// release, the module version when the binary was built from a tagged
// module (go install ...@version), the VCS revision when it was built
// from a checkout, and the Go version.
func String(name string) string {
	s := fmt.Sprintf("%s %s", name, Release)
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" && v != Release {
			s += " (module " + v + ")"
		}
		rev, dirty := "", false
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				dirty = kv.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if dirty {
				rev += "+dirty"
			}
			s += " " + rev
		}
	}
	return s + " " + runtime.Version()
}
