package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/warden-sandbox/warden/internal/template"
)

// TemplateStore reports the template store at dir (state-dir/templates):
// how many templates and layers, their bytes, the layers GC would free,
// and any damage. It never creates the store: none is fine, only "host"
// is offered then. Problems are warnings: "host" still runs.
func TemplateStore(dir string) Check {
	c := Check{Name: "templates"}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		c.Status, c.Detail = OK, "no template store at "+dir+": only the host's root is offered"
		return c
	}
	s, err := template.Open(dir, template.Options{})
	if err != nil {
		c.Status, c.Detail = Warn, err.Error()
		return c
	}
	rep := s.Check()
	c.Status = OK
	c.Detail = fmt.Sprintf("%d templates, %d layers, %d bytes in %s", rep.Templates, rep.Layers, rep.Bytes, dir)
	if rep.Unused > 0 {
		c.Detail += fmt.Sprintf("; %d layers unused", rep.Unused)
		c.Fix = "warden template gc frees the unused layers"
	}
	if len(rep.Problems) > 0 {
		c.Status = Warn
		c.Detail += "; problems: " + strings.Join(rep.Problems, "; ")
	}
	return c
}
