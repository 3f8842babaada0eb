package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// operation is what the spec says a request to one route must look like.
type operation struct {
	path   string // the spec's path, such as /v1/sessions/{id}
	params []param
	body   *requestBody // nil: the operation takes no body
}

// param is a path or query parameter; header and cookie parameters are
// not supported, as the spec has none.
type param struct {
	name     string
	in       string // path or query
	required bool
	schema   *schema // of type string or boolean
}

type requestBody struct {
	required bool
	// upload marks an application/octet-stream body: a byte stream the
	// handler bounds itself, neither read into memory nor checked here.
	upload bool
	schema *schema // of the application/json body, unless upload
}

// methods are the operations a path item may have.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// operationKeywords are those an operation may use. Only parameters and
// requestBody describe the request's shape; the others are documentation,
// answers, or security, which authentication enforces before validation.
var operationKeywords = []string{"operationId", "tags", "summary", "security", "responses", "parameters", "requestBody"}

// loadOperations reads an OpenAPI 3.0 document and returns its
// operations by ServeMux pattern ("GET /v1/sessions/{id}"): the mux's
// patterns are the spec's paths, so the route the mux serves and the
// operation validated are always the same.
func loadOperations(doc []byte) (map[string]*operation, error) {
	var root map[string]any
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	if v, _ := root["openapi"].(string); !strings.HasPrefix(v, "3.0.") {
		return nil, fmt.Errorf("openapi version %q: only 3.0 is supported", v)
	}
	paths, ok := root["paths"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("paths: missing, or not an object")
	}
	l := &specLoader{root: root, schemas: map[string]*schema{}}
	ops := map[string]*operation{}
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		if err := l.addPath(ops, path, paths[path]); err != nil {
			return nil, err
		}
	}
	return ops, nil
}

// specLoader builds operations from the decoded document. It keeps each
// schema it built by $ref, so a shared one (Limits, Env) is built once and
// a schema that refers to itself does not recurse forever.
type specLoader struct {
	root    map[string]any
	schemas map[string]*schema
}

func (l *specLoader) addPath(ops map[string]*operation, path string, node any) error {
	at := "paths[" + path + "]"
	kw, err := newKeywords(node, at)
	if err != nil {
		return err
	}
	if err := kw.only(append([]string{"parameters"}, methods...)); err != nil {
		return err
	}
	shared, err := l.params(kw.m["parameters"], at+".parameters")
	if err != nil {
		return err
	}
	for _, method := range methods {
		if node, ok := kw.m[method]; ok {
			op, err := l.operation(path, shared, node, at+"."+method)
			if err != nil {
				return err
			}
			ops[strings.ToUpper(method)+" "+path] = op
		}
	}
	return nil
}

func (l *specLoader) operation(path string, shared []param, node any, at string) (*operation, error) {
	kw, err := newKeywords(node, at)
	if err != nil {
		return nil, err
	}
	if err := kw.only(operationKeywords); err != nil {
		return nil, err
	}
	own, err := l.params(kw.m["parameters"], at+".parameters")
	if err != nil {
		return nil, err
	}
	op := &operation{path: path, params: own}
	// An operation's parameter overrides the path item's of the same name
	// and location.
	for _, p := range shared {
		if !slices.ContainsFunc(own, func(o param) bool { return o.name == p.name && o.in == p.in }) {
			op.params = append(op.params, p)
		}
	}
	if err := checkPathParams(path, op.params, at); err != nil {
		return nil, err
	}
	if body, ok := kw.m["requestBody"]; ok {
		if op.body, err = l.requestBody(body, at+".requestBody"); err != nil {
			return nil, err
		}
	}
	return op, nil
}

// checkPathParams makes sure the {params} of path and the path
// parameters declared are the same, so none goes unchecked.
func checkPathParams(path string, params []param, at string) error {
	var inPath []string
	for _, seg := range strings.Split(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			inPath = append(inPath, strings.TrimSuffix(name, "}"))
		}
	}
	declared := 0
	for _, p := range params {
		if p.in == "path" {
			declared++
			if !slices.Contains(inPath, p.name) {
				return fmt.Errorf("%s: path parameter %q is not in the path", at, p.name)
			}
		}
	}
	if declared != len(inPath) {
		return fmt.Errorf("%s: the path's parameters %q are not all declared", at, inPath)
	}
	return nil
}

func (l *specLoader) params(node any, at string) ([]param, error) {
	if node == nil {
		return nil, nil
	}
	list, ok := node.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: not a list", at)
	}
	out := make([]param, 0, len(list))
	for i, node := range list {
		p, err := l.param(node, fmt.Sprintf("%s[%d]", at, i))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func (l *specLoader) param(node any, at string) (param, error) {
	node, at, err := l.deref(node, "parameters", at)
	if err != nil {
		return param{}, err
	}
	kw, err := newKeywords(node, at)
	if err != nil {
		return param{}, err
	}
	if err := kw.only([]string{"name", "in", "required", "schema"}); err != nil {
		return param{}, err
	}
	var p param
	if p.name, err = kw.str("name"); err != nil {
		return p, err
	}
	if p.in, err = kw.str("in"); err != nil {
		return p, err
	}
	if p.required, err = kw.boolean("required"); err != nil {
		return p, err
	}
	switch {
	case p.name == "":
		return p, fmt.Errorf("%s: a parameter needs a name", at)
	case p.in != "path" && p.in != "query":
		return p, fmt.Errorf("%s: parameters in %q are not supported", at, p.in)
	case p.in == "path" && !p.required:
		return p, fmt.Errorf("%s: a path parameter must be required", at)
	}
	if p.schema, err = l.compileSchema(kw.m["schema"], at+".schema"); err != nil {
		return p, err
	}
	if t := p.schema.typ; t != "string" && t != "boolean" {
		return p, fmt.Errorf("%s: parameters of type %s are not supported", at, t)
	}
	return p, nil
}

func (l *specLoader) requestBody(node any, at string) (*requestBody, error) {
	node, at, err := l.deref(node, "requestBodies", at)
	if err != nil {
		return nil, err
	}
	kw, err := newKeywords(node, at)
	if err != nil {
		return nil, err
	}
	if err := kw.only([]string{"required", "content"}); err != nil {
		return nil, err
	}
	b := &requestBody{}
	if b.required, err = kw.boolean("required"); err != nil {
		return nil, err
	}
	content, err := kw.object("content")
	if err != nil {
		return nil, err
	}
	if len(content) != 1 {
		return nil, fmt.Errorf("%s.content: has %d media types; the validator supports exactly one", at, len(content))
	}
	for mediaType, media := range content {
		at := at + ".content[" + mediaType + "]"
		mkw, err := newKeywords(media, at)
		if err != nil {
			return nil, err
		}
		if err := mkw.only([]string{"schema"}); err != nil {
			return nil, err
		}
		switch mediaType {
		case "application/json":
			b.schema, err = l.compileSchema(mkw.m["schema"], at+".schema")
		case "application/octet-stream":
			b.upload = true
		default:
			err = fmt.Errorf("%s: media type %q is not supported", at, mediaType)
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// schemaRef builds the schema a $ref names. Its entry is made before it
// is built, so a reference back to it gets the schema being built.
func (l *specLoader) schemaRef(ref string) (*schema, error) {
	if s, ok := l.schemas[ref]; ok {
		return s, nil
	}
	node, at, err := l.resolve(ref, "schemas")
	if err != nil {
		return nil, err
	}
	s := &schema{}
	l.schemas[ref] = s
	built, err := l.compileSchema(node, at)
	if err != nil {
		return nil, err
	}
	*s = *built
	return s, nil
}

// deref returns node and its location, or what it refers to when it is a
// reference object to a component of kind.
func (l *specLoader) deref(node any, kind, at string) (any, string, error) {
	ref, err := refOf(node, at)
	if err != nil || ref == "" {
		return node, at, err
	}
	return l.resolve(ref, kind)
}

// resolve finds a local reference, "#/components/<kind>/<name>", the only
// form the spec uses.
func (l *specLoader) resolve(ref, kind string) (any, string, error) {
	name, ok := strings.CutPrefix(ref, "#/components/"+kind+"/")
	if !ok || name == "" || strings.ContainsAny(name, "/~") {
		return nil, "", fmt.Errorf("$ref %q: only #/components/%s/<name> is supported here", ref, kind)
	}
	components, _ := l.root["components"].(map[string]any)
	group, _ := components[kind].(map[string]any)
	node, ok := group[name]
	if !ok {
		return nil, "", fmt.Errorf("$ref %q: no such component", ref)
	}
	return node, "components." + kind + "." + name, nil
}

// refOf returns the target of a reference object, {$ref: ...}, or "" for
// any other node. OpenAPI 3.0 ignores a $ref's siblings, so a bound
// written next to one would go unchecked: only annotations may be there.
func refOf(node any, at string) (string, error) {
	m, ok := node.(map[string]any)
	if !ok {
		return "", nil
	}
	v, ok := m["$ref"]
	if !ok {
		return "", nil
	}
	ref, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s.$ref: must be a string, not %T", at, v)
	}
	if err := (&keywords{m, at}).only([]string{"$ref"}); err != nil {
		return "", err
	}
	return ref, nil
}
