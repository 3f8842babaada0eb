package server

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// keywords is a schema object being read. Annotations (description,
// example, default, x-...) change nothing the validator checks, so they
// are the only keywords it may skip.
type keywords struct {
	m  map[string]any
	at string
}

func newKeywords(node any, at string) (*keywords, error) {
	m, ok := node.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: missing, or not an object", at)
	}
	return &keywords{m, at}, nil
}

func isAnnotation(name string) bool {
	switch name {
	case "description", "example", "default":
		return true
	}
	return strings.HasPrefix(name, "x-")
}

// only fails on the first keyword, in sorted order, that is neither in
// known nor an annotation.
func (k *keywords) only(known []string) error {
	for _, name := range slices.Sorted(maps.Keys(k.m)) {
		if !slices.Contains(known, name) && !isAnnotation(name) {
			return fmt.Errorf("%s: keyword %q is not supported by the request validator", k.at, name)
		}
	}
	return nil
}

func (k *keywords) wrongType(name, want string) error {
	return fmt.Errorf("%s.%s: must be %s, not %T", k.at, name, want, k.m[name])
}

func (k *keywords) str(name string) (string, error) {
	v, ok := k.m[name]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", k.wrongType(name, "a string")
	}
	return s, nil
}

func (k *keywords) boolean(name string) (bool, error) {
	v, ok := k.m[name]
	if !ok {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, k.wrongType(name, "a boolean")
	}
	return b, nil
}

func (k *keywords) object(name string) (map[string]any, error) {
	v, ok := k.m[name]
	if !ok {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, k.wrongType(name, "an object")
	}
	return m, nil
}

func (k *keywords) strings(name string) ([]string, error) {
	v, ok := k.m[name]
	if !ok {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, k.wrongType(name, "a list")
	}
	out := make([]string, len(list))
	for i, e := range list {
		if out[i], ok = e.(string); !ok {
			return nil, fmt.Errorf("%s.%s[%d]: must be a string, not %T", k.at, name, i, e)
		}
	}
	return out, nil
}

// count reads a length or size bound, a non-negative integer.
func (k *keywords) count(name string) (*int, error) {
	v, ok := k.m[name]
	if !ok {
		return nil, nil
	}
	n, ok := v.(int)
	if !ok || n < 0 {
		return nil, k.wrongType(name, "a non-negative integer")
	}
	return &n, nil
}

func (k *keywords) bound(name string) (*bound, error) {
	v, ok := k.m[name]
	if !ok {
		return nil, nil
	}
	switch v := v.(type) {
	case int:
		return &bound{i: int64(v), exact: true, f: float64(v)}, nil
	case int64: // what YAML gives for integers beyond a 32-bit int
		return &bound{i: v, exact: true, f: float64(v)}, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, k.wrongType(name, "a finite number")
		}
		return &bound{f: v}, nil
	}
	return nil, k.wrongType(name, "a number")
}
