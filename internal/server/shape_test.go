package server

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	apispec "github.com/warden-sandbox/warden/api"
)

// TestRequestShapeCoversTheSpec checks the shape derived from the real
// spec against every bound of every JSON request body: prescan must never
// refuse a body the schema allows.
func TestRequestShapeCoversTheSpec(t *testing.T) {
	ops, err := loadOperations(apispec.OpenAPIYAML)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := requestShape(ops)
	if err != nil {
		t.Fatalf("requestShape: %v", err)
	}
	var visit func(s *schema, depth int)
	visit = func(s *schema, depth int) {
		for _, n := range []*int{s.maxItems, s.maxProperties} {
			if n != nil && *n > sh.width {
				t.Errorf("a bound of %d is above the shape's width %d", *n, sh.width)
			}
		}
		switch s.typ {
		case "array":
			visit(s.items, depth+1)
		case "object":
			for _, p := range s.properties {
				visit(p, depth+1)
			}
			if s.additional != nil {
				visit(s.additional, depth+1)
			}
		default:
			return
		}
		if depth+1 > sh.depth {
			t.Errorf("a container at depth %d is below the shape's depth %d", depth+1, sh.depth)
		}
	}
	for pattern, op := range ops {
		if op.body != nil && !op.body.upload {
			t.Run(pattern, func(t *testing.T) { visit(op.body.schema, 0) })
		}
	}
	if sh.width < 4096 || sh.values < 4096 {
		t.Errorf("shape %+v does not allow a command of 4096 items", sh)
	}
}

func TestRequestShape(t *testing.T) {
	tests := []struct {
		name, n string
		want    shape
		wantErr string
	}{
		{"nested arrays", `{type: array, maxItems: 5, items: {type: array, maxItems: 7, items: {type: integer}}}`,
			shape{depth: 3, width: 7, values: 42}, ""},
		{"map", `{type: object, maxProperties: 9, additionalProperties: {type: string}}`,
			shape{depth: 2, width: 9, values: 11}, ""},
		{"array without maxItems", `{type: array, items: {type: string}}`,
			shape{}, "POST /x/{id}: n: an array needs maxItems"},
		{"open object", `{type: object}`,
			shape{}, "n: an object needs additionalProperties (false, or a schema)"},
		{"map without maxProperties", `{type: object, additionalProperties: {type: string}}`,
			shape{}, "n: an object with additionalProperties needs maxProperties"},
		{"schema inside itself", `{$ref: "#/components/schemas/Body"}`,
			shape{}, "n: the schema contains itself, so its depth has no bound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := loadOperations([]byte(specWith(idParam, "application/json", tt.n)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := requestShape(ops)
			if tt.wantErr != "" {
				if err == nil || !strings.HasSuffix(err.Error(), tt.wantErr) {
					t.Errorf("got %+v, %v; want an error ending %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestPrescan(t *testing.T) {
	sh := shape{depth: 3, width: 4, values: 20}
	tests := []struct {
		body, want string
	}{
		{`{"a":[1,2,3,4],"b":{"c":[]}}`, ""},
		{`[true,false,null,-1.5e+3]`, ""},
		{`{"a":"[[[[,,,,,,\"]]]{{{{"}`, ""},
		{`{"a":`, ""},      // malformed: left to the decoder
		{`]]]]}}}}[]`, ""}, // likewise
		{`{"a":[1,2,3,4,5]}`, "a: array has more than 4 items"},
		{`[1,2,3,4,5]`, "request body: array has more than 4 items"},
		{`{"a":1,"b":2,"c":3,"d":4,"e":5}`, "request body: object has more than 4 members"},
		{`{"a":{"b":[[1]]}}`, "a.b[0]: nesting is deeper than 3 levels"},
		{`{"x":1,"a b":[{"c":{}}]}`, `["a b"][0].c: nesting is deeper than 3 levels`},
		{`{"\u0041":{"b":{"c":{}}}}`, "A.b.c: nesting is deeper than 3 levels"},
		{`{"a":[0,[1,2,3,[]]]}`, "a[1][3]: nesting is deeper than 3 levels"},
		{`[[1,2,3,4],[1,2,3,4],[1,2,3,4],[1,2,3,4]]`, "request body: has more than 20 values"},
	}
	for _, tt := range tests {
		err := sh.prescan([]byte(tt.body))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("prescan(%s): got %q, want %q", tt.body, got, tt.want)
		}
	}
}

// TestLargeBodyRefusedBeforeDecoding sends a full-size body of tiny
// array items, which decoded costs about 16 times its size, and checks
// it is refused for its shape having cost little more than its bytes.
func TestLargeBodyRefusedBeforeDecoding(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(keyA)
	exec := "/v1/sessions/" + id + "/exec"
	body := `{"command":[0` + strings.Repeat(",0", int(DefaultMaxBodyBytes-20)/2) + `]}`
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp := h.do("POST", exec, keyA, body)
	runtime.ReadMemStats(&after)
	_, msg := resp.errorMessage()
	if want := "command: array has more than 4096 items"; resp.status != http.StatusBadRequest || msg != want {
		t.Errorf("got %d %q, want 400 %q", resp.status, msg, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*uint64(len(body)) {
		t.Errorf("refusing a %d-byte body allocated %d bytes", len(body), alloc)
	}

	// A body at the spec's bounds still passes.
	items := `"x"` + strings.Repeat(`,"x"`, 4095)
	env := make([]string, 256)
	for i := range env {
		env[i] = fmt.Sprintf(`"E%d":"v"`, i)
	}
	resp = h.do("POST", exec, keyA, `{"command":[`+items+`],"env":{`+strings.Join(env, ",")+`}}`)
	if resp.status != http.StatusOK {
		t.Errorf("a body at the bounds: got %d %s", resp.status, resp.body)
	}
	deep := `{"limits":{"x":{"y":{}}}}`
	resp = h.do("POST", "/v1/sessions", keyA, deep)
	if _, msg := resp.errorMessage(); msg != "limits.x.y: nesting is deeper than 3 levels" {
		t.Errorf("%s: got %d %s", deep, resp.status, resp.body)
	}
}

// TestBodyOfABodilessOperationIsNotRead: an operation that takes no body
// ignores one, without reading it into memory first.
func TestBodyOfABodilessOperationIsNotRead(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(keyA)
	if resp := h.do("GET", "/v1/sessions/"+id, keyA, `not JSON`); resp.status != http.StatusOK {
		t.Errorf("got %d %s", resp.status, resp.body)
	}
}
