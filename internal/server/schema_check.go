package server

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// fieldError is a request value the spec does not allow: field names it
// (limits.memory_bytes, command[1]; "" for the value itself) and reason
// says which bound it breaks, in one line.
type fieldError struct {
	field, reason string
}

func (e *fieldError) Error() string { return e.field + ": " + e.reason }

// in turns e into the client's answer; whole names the value itself
// ("request body", "query parameter path") when e is about all of it.
func (e *fieldError) in(whole string) *apiError {
	if e.field == "" {
		return badRequest("%s: %s", whole, e.reason)
	}
	return badRequest("%s", e.Error())
}

// typeNames name each type in messages: "value must be an integer".
var typeNames = map[string]string{
	"object": "an object", "array": "an array", "string": "a string",
	"integer": "an integer", "number": "a number", "boolean": "a boolean",
}

// check validates v, a JSON value decoded with UseNumber, at field, and
// returns the first bound it breaks, visiting object keys in sorted order
// so the same request always gets the same message.
func (s *schema) check(v any, field string) *fieldError {
	fail := func(format string, args ...any) *fieldError {
		return &fieldError{field, fmt.Sprintf(format, args...)}
	}
	var ok bool
	switch v := v.(type) {
	case nil:
		if s.nullable {
			return nil
		}
		return fail("value must be %s, not null", typeNames[s.typ])
	case map[string]any:
		if ok = s.typ == "object"; ok {
			return s.checkObject(v, field)
		}
	case []any:
		if ok = s.typ == "array"; ok {
			return s.checkArray(v, field)
		}
	case string:
		if ok = s.typ == "string"; ok {
			return s.checkString(v, fail)
		}
	case json.Number:
		if ok = s.typ == "number" || s.typ == "integer"; ok {
			return s.checkNumber(v, fail)
		}
	case bool:
		ok = s.typ == "boolean"
	}
	if !ok {
		return fail("value must be %s", typeNames[s.typ])
	}
	return nil
}

func (s *schema) checkObject(m map[string]any, field string) *fieldError {
	if s.maxProperties != nil && len(m) > *s.maxProperties {
		return &fieldError{field, fmt.Sprintf("maximum number of properties is %d", *s.maxProperties)}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		sub := s.properties[k]
		if sub == nil {
			sub = s.additional
		}
		if sub == nil {
			if s.closed {
				return &fieldError{field, fmt.Sprintf("property %q is unsupported", k)}
			}
			continue
		}
		if err := sub.check(m[k], member(field, k)); err != nil {
			return err
		}
	}
	for _, k := range s.required {
		if _, ok := m[k]; !ok {
			return &fieldError{field, fmt.Sprintf("property %q is missing", k)}
		}
	}
	return nil
}

func (s *schema) checkArray(list []any, field string) *fieldError {
	if s.minItems != nil && len(list) < *s.minItems {
		return &fieldError{field, fmt.Sprintf("minimum number of items is %d", *s.minItems)}
	}
	if s.maxItems != nil && len(list) > *s.maxItems {
		return &fieldError{field, fmt.Sprintf("maximum number of items is %d", *s.maxItems)}
	}
	for i, v := range list {
		if err := s.items.check(v, field+"["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	return nil
}

func (s *schema) checkString(v string, fail func(string, ...any) *fieldError) *fieldError {
	// Lengths count characters, as JSON Schema does, not bytes.
	n := utf8.RuneCountInString(v)
	switch {
	case s.minLength != nil && n < *s.minLength:
		return fail("minimum string length is %d", *s.minLength)
	case s.maxLength != nil && n > *s.maxLength:
		return fail("maximum string length is %d", *s.maxLength)
	case s.pattern != nil && !s.pattern.MatchString(v):
		return fail("string doesn't match the regular expression %q", s.pattern)
	case s.enum != nil && !slices.Contains(s.enum, v):
		return fail("value is not one of the allowed values %s", s.enumText)
	}
	return nil
}

// checkNumber compares a number with its bounds exactly when both are
// integers that fit an int64, and as float64 otherwise; a value too large
// for a float64 is infinite, and so out of any bound.
func (s *schema) checkNumber(v json.Number, fail func(string, ...any) *fieldError) *fieldError {
	i, err := strconv.ParseInt(string(v), 10, 64)
	isInt := err == nil
	f := float64(i)
	if !isInt {
		// The decoder has checked the syntax; only the range can fail.
		f, _ = strconv.ParseFloat(string(v), 64)
	}
	if s.typ == "integer" && !isInt && f != math.Trunc(f) {
		return fail("value must be an integer")
	}
	compare := func(b *bound) int {
		if isInt && b.exact {
			return cmp.Compare(i, b.i)
		}
		return cmp.Compare(f, b.f)
	}
	switch {
	case s.minimum != nil && compare(s.minimum) < 0:
		return fail("number must be at least %s", s.minimum)
	case s.maximum != nil && compare(s.maximum) > 0:
		return fail("number must be at most %s", s.maximum)
	case s.int64Format && !isInt && (f < math.MinInt64 || f >= math.MaxInt64):
		return fail("number must fit in a 64-bit integer")
	}
	return nil
}

// member names property k of field: limits.memory_bytes, or env["A B"]
// when the name could be misread or break the message's one line.
func member(field, k string) string {
	switch {
	case !isIdentifier(k):
		return field + "[" + strconv.Quote(k) + "]"
	case field == "":
		return k
	}
	return field + "." + k
}

// isIdentifier says whether s is letters, digits and _, not starting
// with a digit. It is a loop rather than a regexp so that nothing is
// compiled at package init, which every warden process pays for (each
// sandbox's start too, when warden runs itself as the init).
func isIdentifier(s string) bool {
	for i, c := range s {
		if !(c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}
