package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

var (
	// linkRE matches an inline Markdown link or image: [text](target).
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// codeSpanRE matches an inline code span, whose text is not a link.
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	// headingRE matches an ATX heading and captures its text.
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// prose returns the lines of a Markdown file outside fenced code blocks,
// with inline code spans removed, keyed by their 1-based line numbers.
func prose(text string) map[int]string {
	out := map[int]string{}
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out[i+1] = codeSpanRE.ReplaceAllString(line, "")
		}
	}
	return out
}

// Anchors returns the fragment ids GitHub gives the headings of a Markdown
// text: lower case, punctuation dropped, spaces as hyphens, and -1, -2, ...
// after an id already taken.
func Anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		id := slug(m[1])
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

// slug is GitHub's id for one heading's text.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CheckFile returns one error for each relative link in the Markdown file
// at path that names a missing file or a missing heading.
func CheckFile(path string) ([]error, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", path, err)
	}
	var bad []error
	for n, line := range prose(string(text)) {
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			if err := checkTarget(path, string(text), m[1]); err != nil {
				bad = append(bad, fmt.Errorf("%s:%d: link %q: %w", path, n, m[1], err))
			}
		}
	}
	return bad, nil
}

// checkTarget resolves one link target relative to the file at from, whose
// own text resolves a bare #fragment.
func checkTarget(from, text, target string) error {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return nil
	}
	file, frag, _ := strings.Cut(target, "#")
	if file != "" {
		p := filepath.Join(filepath.Dir(from), filepath.FromSlash(file))
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("no such file %s: fix the path", p)
		}
		if frag == "" || st.IsDir() || !strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("reading %q: %w", p, err)
		}
		text = string(b)
	}
	if frag != "" && !Anchors(text)[frag] {
		return fmt.Errorf("no heading with id #%s: link to one of the file's headings", frag)
	}
	return nil
}
