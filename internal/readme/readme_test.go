// Package readme holds the tests of the README and docs/: that every Go
// snippet of the README is the text of an example test, so that the
// snippets compile and run as the examples do, and neither can change
// without the other; that the README's lines for depending on the module
// name the module and its release; that every relative link resolves;
// that deploy/kubernetes's Job tests the server its manifests deploy.
//
// A README ```go block is either the body of an Example function (pasted
// into a func main, it runs) or a run of top-level declarations (pasted
// into a file), in a file named example_readme_test.go of the package it
// uses. Both sides are compared with their common leading tabs removed.
package readme

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the module's root, from this package's directory.
const root = "../.."

// exampleFile names the files whose examples the README quotes.
const exampleFile = "example_readme_test.go"

// A snippet is a piece of Go source: a README block or an example's text.
type snippet struct {
	where string // README.md:LINE, or FILE:LINE and what it is
	text  string // normalized: see normalize
}

func TestREADME_SnippetsAreExamples(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks := goBlocks(string(readme))
	require.NotEmpty(t, blocks, "README.md has no ```go block")

	var units []snippet
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() != "." && d.Name() != ".." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.Name() == exampleFile {
			u, err := exampleUnits(path)
			if err != nil {
				return err
			}
			units = append(units, u...)
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, units, "no %s in the module", exampleFile)

	used := make([]bool, len(units))
	for _, b := range blocks {
		i := match(b, units)
		if i < 0 {
			t.Errorf("%s: this ```go block is no Example body or declarations of any %s; make it the text of one, or change both.\n%s",
				b.where, exampleFile, closest(b, units))
			continue
		}
		used[i] = true
	}
	for i, u := range units {
		assert.True(t, used[i], "%s is not in README.md: quote it there, or move it out of %s", u.where, exampleFile)
	}
}

// goBlocks returns the ```go blocks of a Markdown text.
func goBlocks(md string) []snippet {
	var (
		out   []snippet
		cur   []string
		in    bool
		start int
	)
	sc := bufio.NewScanner(strings.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case !in && strings.TrimSpace(line) == "```go":
			in, start, cur = true, n, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			out = append(out, snippet{where: "README.md:" + strconv.Itoa(start), text: normalize(strings.Join(cur, "\n"))})
		case in:
			cur = append(cur, line)
		}
	}
	return out
}

// exampleUnits returns what a README block may quote from an example file:
// the body of each Example function, and each run of consecutive other
// top-level declarations (imports excepted) with their comments.
func exampleUnits(path string) ([]snippet, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	rel, _ := filepath.Rel(root, path)
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	line := func(p token.Pos) string { return rel + ":" + strconv.Itoa(fset.Position(p).Line) }
	var (
		out        []snippet
		runStart   token.Pos // the first declaration of the run open, or NoPos
		runEnd     token.Pos
		closeRunAt = func() {
			if runStart.IsValid() {
				out = append(out, snippet{where: line(runStart) + " (declarations)", text: normalize(string(src[off(runStart):off(runEnd)]))})
				runStart = token.NoPos
			}
		}
	)
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
			continue
		}
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
			closeRunAt()
			body := src[off(fn.Body.Lbrace)+1 : off(fn.Body.Rbrace)]
			out = append(out, snippet{where: line(fn.Pos()) + " (" + fn.Name.Name + "'s body)", text: normalize(string(body))})
			continue
		}
		if !runStart.IsValid() {
			runStart = d.Pos()
			if doc := docOf(d); doc != nil {
				runStart = doc.Pos()
			}
		}
		runEnd = d.End()
	}
	closeRunAt()
	return out, nil
}

func docOf(d ast.Decl) *ast.CommentGroup {
	switch d := d.(type) {
	case *ast.FuncDecl:
		return d.Doc
	case *ast.GenDecl:
		return d.Doc
	}
	return nil
}

// normalize trims blank lines around s, trailing spaces of its lines, and
// the leading tabs its non-blank lines have in common.
func normalize(s string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	common := -1
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
		if lines[i] == "" {
			continue
		}
		if n := len(lines[i]) - len(strings.TrimLeft(lines[i], "\t")); common < 0 || n < common {
			common = n
		}
	}
	for i, l := range lines {
		if l != "" {
			lines[i] = l[common:]
		}
	}
	return strings.Join(lines, "\n")
}

// match returns the index of the unit whose text is b's, or -1.
func match(b snippet, units []snippet) int {
	for i, u := range units {
		if u.text == b.text {
			return i
		}
	}
	return -1
}

// closest says where b first differs from the unit it has the most leading
// lines in common with.
func closest(b snippet, units []snippet) string {
	bl := strings.Split(b.text, "\n")
	best, bestN := -1, -1
	for i, u := range units {
		ul := strings.Split(u.text, "\n")
		n := 0
		for n < len(bl) && n < len(ul) && bl[n] == ul[n] {
			n++
		}
		if n > bestN {
			best, bestN = i, n
		}
	}
	ul := strings.Split(units[best].text, "\n")
	lineAt := func(ls []string, i int) string {
		if i < len(ls) {
			return ls[i]
		}
		return "(end)"
	}
	return "closest: " + units[best].where + ", first difference at its line " + strconv.Itoa(bestN+1) + ":\n" +
		"  README:  " + lineAt(bl, bestN) + "\n  example: " + lineAt(ul, bestN)
}
