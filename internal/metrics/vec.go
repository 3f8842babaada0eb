package metrics

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// vec holds the children of a labelled family, one per combination of
// label values, created on first use.
type vec[T any] struct {
	*desc
	newChild func() *T

	mu       sync.RWMutex
	children map[string]*child[T]
}

type child[T any] struct {
	values []string
	metric *T
}

// with returns the child for values, creating it on first use. A wrong
// number of values panics: label sets are fixed in the caller's code.
func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s: %d label values for %d labels", v.name, len(values), len(v.labels)))
	}
	key := childKey(values)
	v.mu.RLock()
	c, ok := v.children[key]
	v.mu.RUnlock()
	if ok {
		return c.metric
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.children[key]; ok {
		return c.metric
	}
	if v.children == nil {
		v.children = make(map[string]*child[T])
	}
	c = &child[T]{values: slices.Clone(values), metric: v.newChild()}
	v.children[key] = c
	return c.metric
}

// sorted returns the children ordered by their label values.
func (v *vec[T]) sorted() []*child[T] {
	v.mu.RLock()
	cs := make([]*child[T], 0, len(v.children))
	for _, c := range v.children {
		cs = append(cs, c)
	}
	v.mu.RUnlock()
	slices.SortFunc(cs, func(a, b *child[T]) int { return slices.Compare(a.values, b.values) })
	return cs
}

// childKey joins label values unambiguously: each is prefixed by its
// length, so no value can fake a separator.
func childKey(values []string) string {
	var b []byte
	for _, s := range values {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	return string(b)
}
