package version

import (
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	s := String("echo")
	if !strings.HasPrefix(s, "echo "+Release) {
		t.Fatalf("String(%q) = %q, want it to start with %q", "echo", s, "echo "+Release)
	}
	if !strings.HasSuffix(s, runtime.Version()) {
		t.Fatalf("String = %q, want it to end with the Go version %q", s, runtime.Version())
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(Release) {
		t.Fatalf("Release %q is not a semantic version vMAJOR.MINOR.PATCH", Release)
	}
}
