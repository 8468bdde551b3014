package readme

import (
	"cmp"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netwheel/netwheel/internal/version"
)

// TestREADME_DependOnIt: the README's lines for depending on the module
// name the module go.mod declares, and the release version.Release says.
func TestREADME_DependOnIt(t *testing.T) {
	readme := read(t, "README.md")
	mod := regexp.MustCompile(`(?m)^module (\S+)$`).FindStringSubmatch(read(t, "go.mod"))
	require.NotNil(t, mod, "go.mod has no module line")
	for _, line := range []string{
		"go get " + mod[1] + "@" + version.Release,
		"-replace=" + mod[1] + "=../netwheel",
		"go work init . ../netwheel",
	} {
		assert.True(t, strings.Contains(readme, line), "README.md has no %q", line)
	}
}

// TestDocs_LinksResolve: every relative link of the README and docs/ names
// a file or directory of the module, and its #fragment, if any, a heading
// of that file (as GitHub derives anchors).
func TestDocs_LinksResolve(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range append(docs, filepath.Join(root, "README.md")) {
		rel, _ := filepath.Rel(root, doc)
		src := read(t, rel)
		for _, m := range link.FindAllStringSubmatch(src, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link to %s: %v", rel, target, err)
					continue
				}
			}
			if frag != "" {
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Contains(t, anchors(string(b)), frag, "%s: link to %s: no such heading", rel, target)
			}
		}
	}
}

// headingsOf returns the headings of a Markdown text, code blocks skipped.
func headingsOf(md string) []string {
	var out []string
	code := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			code = !code
		}
		if !code && strings.HasPrefix(line, "#") {
			out = append(out, strings.TrimSpace(strings.TrimLeft(line, "#")))
		}
	}
	return out
}

// anchors returns the anchors GitHub gives the headings of a Markdown text:
// lower case, punctuation but '-' and '_' dropped, spaces made '-'.
func anchors(md string) []string {
	var out []string
	for _, h := range headingsOf(md) {
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// read returns the text of the file at path, relative to the module's root.
func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	require.NoError(t, err)
	return string(b)
}

// TestDeploy_JobTestsTheDeployedServer: deploy/kubernetes's Job dials the
// Service that echo.yaml defines, on the port cmd/echo listens on there,
// describes the server's protocol and idle timeout by the flags cmd/echo
// is given, and both run the image the Dockerfile builds, whose binaries
// are where the manifests run them.
func TestDeploy_JobTestsTheDeployedServer(t *testing.T) {
	job := read(t, "deploy/kubernetes/loadtest-job.yaml")
	echo := read(t, "deploy/kubernetes/echo.yaml")
	docker := read(t, "deploy/kubernetes/Dockerfile")
	find := func(src, re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(src)
		require.NotNil(t, m, "no match for %s", re)
		return m[1]
	}
	flag := func(args, name string) string { return find(args, `(?:^|[\s"])-`+name+`"?,? +"?([^\s",]+)`) }

	args := find(echo, `args: \[(.*)\]`)
	service := find(echo, `kind: Service\nmetadata:\n  name: (\S+)`)
	assert.Equal(t, service+".default.svc.cluster.local:"+find(echo, `kind: Service[\s\S]*port: (\d+)`),
		find(job, `name: SERVER\s+value: "([^"]+)"`), "the Job's SERVER is echo.yaml's Service")
	assert.Equal(t, ":"+find(echo, `name: echo\s+containerPort: (\d+)`), flag(args, "addr"), "cmd/echo listens on the port the Service targets")

	run := find(job, `(/usr/local/bin/loadtest -addr [^\n]*)`)
	assert.Equal(t, flag(args, "proto"), flag(run, "proto"))
	assert.Equal(t, flag(args, "idle-timeout"), flag(run, "idle"))

	image := find(job, `image: (netwheel:\S+)`)
	assert.Equal(t, image, find(echo, `image: (\S+)`))
	assert.Contains(t, docker, "-t "+image+" .")
	for _, bin := range []string{find(echo, `command: \["([^"]+)"\]`), "/usr/local/bin/loadtest"} {
		assert.Contains(t, docker, "-o /out/"+filepath.Base(bin)+" ", "the Dockerfile builds %s", bin)
	}
	assert.Contains(t, docker, "/usr/local/bin/")
}

// TestDocs_SectionsNamedExist: a section named in prose or a comment, as
// docs/perf.md, "Memory per connection", is the start of a heading of that
// file, in every Markdown and Go file of the tree.
func TestDocs_SectionsNamedExist(t *testing.T) {
	ref := regexp.MustCompile(`(?:docs/)?([a-z]+)\.md, "([^"]+)"`)
	joinComments := regexp.MustCompile(`\n\s*(//)?\s*`)
	headings := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && strings.HasPrefix(d.Name(), ".") && d.Name() != "." && d.Name() != ".." {
			return cmp.Or(err, filepath.SkipDir)
		}
		if ext := filepath.Ext(path); d.IsDir() || ext != ".go" && ext != ".md" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range ref.FindAllStringSubmatch(joinComments.ReplaceAllString(string(b), " "), -1) {
			doc := "docs/" + m[1] + ".md"
			if m[1] == "readme" || m[1] == "README" {
				doc = "README.md"
			}
			if headings[doc] == nil {
				headings[doc] = headingsOf(read(t, doc))
			}
			assert.True(t, slices.ContainsFunc(headings[doc], func(h string) bool { return strings.HasPrefix(h, m[2]) }),
				"%s names the section %q of %s, which has no such heading", rel, m[2], doc)
		}
		return nil
	})
	require.NoError(t, err)
}
