package metrics

import (
	"fmt"
	"slices"
)

// desc is what a family is: its name, help, type and label names.
type desc struct {
	name   string
	help   string
	typ    string
	labels []string
}

// newDesc checks the names of a family and panics on an invalid one:
// names are constants in the caller, so a bad one is a programmer error
// best caught by the first test that builds it.
func newDesc(name, help, typ string, labels []string, reserved ...string) *desc {
	if !validMetricName(name) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", name))
	}
	for i, l := range labels {
		switch {
		case !validLabelName(l):
			panic(fmt.Sprintf("metrics: %s: invalid label name %q", name, l))
		case slices.Contains(reserved, l):
			panic(fmt.Sprintf("metrics: %s: label name %q is reserved", name, l))
		case slices.Contains(labels[:i], l):
			panic(fmt.Sprintf("metrics: %s: label name %q repeated", name, l))
		}
	}
	return &desc{name: name, help: help, typ: typ, labels: slices.Clone(labels)}
}

func (d *desc) family() *desc { return d }

// validMetricName reports whether s matches [a-zA-Z_:][a-zA-Z0-9_:]*.
func validMetricName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isLetter(c) || c == '_' || c == ':' || i > 0 && isDigit(c)) {
			return false
		}
	}
	return s != ""
}

// validLabelName reports whether s matches [a-zA-Z_][a-zA-Z0-9_]* and
// does not start with "__", which Prometheus reserves for itself.
func validLabelName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isLetter(c) || c == '_' || i > 0 && isDigit(c)) {
			return false
		}
	}
	return s != "" && (len(s) < 2 || s[:2] != "__")
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
