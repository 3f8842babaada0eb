package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// shape bounds the structure of a JSON request body: how deeply its
// arrays and objects nest, how many items or members any one of them
// holds, and how many values (containers and scalars) it has in all.
// Decoded, a JSON value costs many times its bytes ([0,0,...] about 16
// times), so prescan holds a body to these bounds before it is decoded.
type shape struct {
	depth  int // containers nested, the body itself included
	width  int // items of one array or members of one object
	values int // values of the whole body
}

// requestShape is the largest shape of any JSON request body in ops, so
// no body that matches its schema is ever refused by prescan. A schema
// whose size the spec leaves unbounded (an array without maxItems, an
// object open to anything, a schema inside itself) is an error, since the
// pre-scan could not bound a body it matches.
func requestShape(ops map[string]*operation) (shape, error) {
	var largest shape
	for _, pattern := range slices.Sorted(maps.Keys(ops)) {
		b := ops[pattern].body
		if b == nil || b.upload {
			continue
		}
		sh, err := b.schema.shape("", map[*schema]bool{})
		if err != nil {
			return shape{}, fmt.Errorf("%s: %w", pattern, err)
		}
		largest = shape{max(largest.depth, sh.depth), max(largest.width, sh.width), max(largest.values, sh.values)}
	}
	return largest, nil
}

// shape is the largest shape of a value s matches at field. inside holds
// the schemas field is nested in, to catch one that contains itself.
func (s *schema) shape(field string, inside map[*schema]bool) (shape, error) {
	where := field
	if where == "" {
		where = "request body"
	}
	if inside[s] {
		return shape{}, fmt.Errorf("%s: the schema contains itself, so its depth has no bound", where)
	}
	inside[s] = true
	defer delete(inside, s)
	var sh shape
	switch s.typ {
	case "array":
		if s.maxItems == nil {
			return shape{}, fmt.Errorf("%s: an array needs maxItems", where)
		}
		item, err := s.items.shape(field+"[*]", inside)
		if err != nil {
			return shape{}, err
		}
		sh = shape{item.depth, max(*s.maxItems, item.width), *s.maxItems * item.values}
	case "object":
		switch {
		case !s.closed && s.additional == nil:
			return shape{}, fmt.Errorf("%s: an object needs additionalProperties (false, or a schema)", where)
		case s.additional != nil && s.maxProperties == nil:
			return shape{}, fmt.Errorf("%s: an object with additionalProperties needs maxProperties", where)
		}
		sh.width = len(s.properties)
		for _, name := range slices.Sorted(maps.Keys(s.properties)) {
			p, err := s.properties[name].shape(member(field, name), inside)
			if err != nil {
				return shape{}, err
			}
			sh = shape{max(sh.depth, p.depth), max(sh.width, p.width), sh.values + p.values}
		}
		if s.maxProperties != nil {
			sh.width = max(sh.width, *s.maxProperties)
		}
		if s.additional != nil {
			a, err := s.additional.shape(member(field, "*"), inside)
			if err != nil {
				return shape{}, err
			}
			sh = shape{max(sh.depth, a.depth), max(sh.width, a.width), sh.values + *s.maxProperties*a.values}
		}
	default:
		return shape{values: 1}, nil
	}
	sh.depth++
	sh.values++
	return sh, nil
}

// scanFrame is one open array or object during prescan.
type scanFrame struct {
	array   bool
	index   int    // commas seen: the index of the current item or member
	wantKey bool   // an object's next string is a member name
	key     []byte // the current member's name, as written between quotes
}

// prescan refuses a body that nests deeper, holds a larger array or
// object, or has more values than sh allows, naming where when it can. It
// allocates nothing but its stack and does not check syntax: it only
// skips strings, so brackets and commas inside them are not counted, and
// leaves malformed JSON to the decoder that runs next.
func (sh shape) prescan(body []byte) error {
	stack := make([]scanFrame, 0, sh.depth)
	values := 0
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '"':
			end := stringEnd(body, i)
			if top := len(stack) - 1; top >= 0 && stack[top].wantKey {
				stack[top].key, stack[top].wantKey = body[i+1:end], false
				i = end
				continue // a member's name, not a value
			}
			i = end
		case c == '{' || c == '[':
			if len(stack) >= sh.depth {
				return (&fieldError{scanPath(stack), fmt.Sprintf("nesting is deeper than %d levels", sh.depth)}).in("request body")
			}
			stack = append(stack, scanFrame{array: c == '[', wantKey: c == '{'})
		case c == '}' || c == ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		case c == ',':
			if top := len(stack) - 1; top >= 0 {
				f := &stack[top]
				// A value follows each comma: this is item index+1.
				if f.index++; f.index >= sh.width {
					what := "object has more than %d members"
					if f.array {
						what = "array has more than %d items"
					}
					return (&fieldError{scanPath(stack[:top]), fmt.Sprintf(what, sh.width)}).in("request body")
				}
				f.wantKey = !f.array
			}
			continue
		case isScalarByte(c):
			for i+1 < len(body) && isScalarByte(body[i+1]) {
				i++
			}
		default: // white space, a colon, or a byte the decoder will refuse
			continue
		}
		if values++; values > sh.values {
			return badRequest("request body: has more than %d values", sh.values)
		}
	}
	return nil
}

// stringEnd is the index of the quote that closes the string opening at
// body[start], or len(body) when it never closes.
func stringEnd(body []byte, start int) int {
	for i := start + 1; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(body)
}

// isScalarByte says whether c can be part of a number, true, false or
// null (and of some malformed tokens, which the decoder refuses).
func isScalarByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.'
}

// scanPath names the current position in stack as check names fields:
// network.allow[3], env["A B"].
func scanPath(stack []scanFrame) string {
	field := ""
	for _, f := range stack {
		if f.array {
			field += "[" + strconv.Itoa(f.index) + "]"
			continue
		}
		var key string
		if err := json.Unmarshal(append(append([]byte{'"'}, f.key...), '"'), &key); err != nil {
			key = string(f.key)
		}
		field = member(field, key)
	}
	return field
}
