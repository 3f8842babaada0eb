package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
)

// schema is one OpenAPI 3.0 schema of a request value, reduced to the
// keywords api/openapi.yaml uses where requests are validated. A spec
// that starts using another keyword there fails to load (see keywords),
// so the spec never promises a bound that goes unchecked.
type schema struct {
	typ      string // object, array, string, integer, number or boolean
	nullable bool

	// object
	properties    map[string]*schema
	required      []string
	closed        bool    // additionalProperties: false
	additional    *schema // additionalProperties as a schema; nil with closed false: anything
	maxProperties *int

	// array
	items              *schema
	minItems, maxItems *int

	// string
	minLength, maxLength *int
	pattern              *regexp.Regexp
	enum                 []string
	enumText             string // the enum as JSON, for messages

	// integer and number
	minimum, maximum *bound
	int64Format      bool // the value must fit in an int64
}

// bound is a minimum or maximum as the spec writes it. An integer bound
// is kept as an integer, so an int64 value near it compares exactly
// rather than after rounding to a float.
type bound struct {
	i     int64
	exact bool // the spec wrote an integer, held in i
	f     float64
}

func (b *bound) String() string {
	if b.exact {
		return strconv.FormatInt(b.i, 10)
	}
	return strconv.FormatFloat(b.f, 'f', -1, 64)
}

// schemaTypes are the keywords each type may use beyond type and
// nullable; any other keyword there (exclusiveMinimum, oneOf, a string
// format...) makes loading fail instead of being silently ignored.
var schemaTypes = map[string][]string{
	"object":  {"properties", "required", "additionalProperties", "maxProperties"},
	"array":   {"items", "minItems", "maxItems"},
	"string":  {"minLength", "maxLength", "pattern", "enum"},
	"integer": {"minimum", "maximum", "format"},
	"number":  {"minimum", "maximum", "format"},
	"boolean": {},
}

// schemaKeywords are the keywords of every type: one outside them all
// (oneOf, exclusiveMinimum...) is named as such, before the type is read.
func schemaKeywords() []string {
	all := []string{"type", "nullable"}
	for _, kws := range schemaTypes {
		all = append(all, kws...)
	}
	return all
}

// numberFormats are the formats the validator understands for each
// numeric type: int64 is checked, double says nothing a float64 does not.
var numberFormats = map[string][]string{
	"integer": {"int64"},
	"number":  {"double"},
}

// compileSchema builds the schema at node, found at location at (such
// as components.schemas.Limits, for errors), resolving $refs through l.
func (l *specLoader) compileSchema(node any, at string) (*schema, error) {
	ref, err := refOf(node, at)
	if err != nil {
		return nil, err
	}
	if ref != "" {
		return l.schemaRef(ref)
	}
	kw, err := newKeywords(node, at)
	if err != nil {
		return nil, err
	}
	if err := kw.only(schemaKeywords()); err != nil {
		return nil, err
	}
	s := &schema{}
	if s.typ, err = kw.str("type"); err != nil {
		return nil, err
	}
	allowed, ok := schemaTypes[s.typ]
	if !ok {
		return nil, fmt.Errorf("%s: type %q is not supported: give one of object, array, string, integer, number or boolean", at, s.typ)
	}
	if s.nullable, err = kw.boolean("nullable"); err != nil {
		return nil, err
	}
	if err := kw.only(append([]string{"type", "nullable"}, allowed...)); err != nil {
		return nil, fmt.Errorf("%w for type %s", err, s.typ)
	}
	switch s.typ {
	case "object":
		err = l.compileObject(s, kw)
	case "array":
		err = l.compileArray(s, kw)
	case "string":
		err = compileString(s, kw)
	case "integer", "number":
		err = compileNumber(s, kw)
	}
	return s, err
}

func (l *specLoader) compileObject(s *schema, kw *keywords) error {
	props, err := kw.object("properties")
	if err != nil {
		return err
	}
	s.properties = make(map[string]*schema, len(props))
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if s.properties[name], err = l.compileSchema(props[name], kw.at+".properties."+name); err != nil {
			return err
		}
	}
	if s.required, err = kw.strings("required"); err != nil {
		return err
	}
	for _, name := range s.required {
		if s.properties[name] == nil {
			return fmt.Errorf("%s: required property %q is not in properties", kw.at, name)
		}
	}
	switch add := kw.m["additionalProperties"].(type) {
	case nil:
	case bool:
		s.closed = !add
	default:
		if s.additional, err = l.compileSchema(add, kw.at+".additionalProperties"); err != nil {
			return err
		}
	}
	s.maxProperties, err = kw.count("maxProperties")
	return err
}

func (l *specLoader) compileArray(s *schema, kw *keywords) error {
	items, ok := kw.m["items"]
	if !ok {
		return fmt.Errorf("%s: an array needs items", kw.at)
	}
	var err error
	if s.items, err = l.compileSchema(items, kw.at+".items"); err != nil {
		return err
	}
	if s.minItems, err = kw.count("minItems"); err != nil {
		return err
	}
	s.maxItems, err = kw.count("maxItems")
	return err
}

func compileString(s *schema, kw *keywords) error {
	var err error
	if s.minLength, err = kw.count("minLength"); err != nil {
		return err
	}
	if s.maxLength, err = kw.count("maxLength"); err != nil {
		return err
	}
	pattern, err := kw.str("pattern")
	if err != nil {
		return err
	}
	if pattern != "" {
		if s.pattern, err = regexp.Compile(pattern); err != nil {
			return fmt.Errorf("%s.pattern: %w", kw.at, err)
		}
	}
	if s.enum, err = kw.strings("enum"); err != nil {
		return err
	}
	if s.enum != nil {
		text, err := json.Marshal(s.enum)
		if err != nil {
			return fmt.Errorf("%s.enum: %w", kw.at, err)
		}
		s.enumText = string(text)
	}
	return nil
}

func compileNumber(s *schema, kw *keywords) error {
	format, err := kw.str("format")
	if err != nil {
		return err
	}
	if format != "" && !slices.Contains(numberFormats[s.typ], format) {
		return fmt.Errorf("%s: format %q is not supported for type %s", kw.at, format, s.typ)
	}
	s.int64Format = format == "int64"
	if s.minimum, err = kw.bound("minimum"); err != nil {
		return err
	}
	s.maximum, err = kw.bound("maximum")
	return err
}
