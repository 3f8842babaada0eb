package mcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// inputSchema infers In's schema from its fields and their jsonschema
// descriptions, then lets refine add what tags cannot say (enums, bounds),
// so the SDK refuses bad arguments with a message naming the field before
// a handler runs. A schema that cannot be built is a programming error.
func inputSchema[In any](refine func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %T: %v", *new(In), err))
	}
	if refine != nil {
		refine(s.Properties)
	}
	return s
}

// bounds sets an integer property's inclusive range.
func bounds(p *jsonschema.Schema, lo, hi int64) {
	p.Minimum, p.Maximum = ptr(float64(lo)), ptr(float64(hi))
}

// enum limits a string property to values.
func enum(p *jsonschema.Schema, values ...string) {
	for _, v := range values {
		p.Enum = append(p.Enum, v)
	}
}

func ptr[T any](v T) *T { return &v }

// argumentErrors rewrites the SDK's schema-validation errors, such as
// `validating "arguments": validating root: validating /properties/code:
// type: 5 has type "integer", want "string"`, into a line that names the
// tool and the argument and says what to do, so a model can fix its call.
func argumentErrors(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		ctr, ok := res.(*sdk.CallToolResult)
		if err != nil || !ok || !ctr.IsError || len(ctr.Content) != 1 {
			return res, err
		}
		tc, ok := ctr.Content[0].(*sdk.TextContent)
		if !ok {
			return res, err
		}
		rest, found := strings.CutPrefix(tc.Text, `validating "arguments": `)
		if !found {
			return res, err
		}
		rest = strings.TrimPrefix(rest, "validating root: ")
		if prop, ok := strings.CutPrefix(rest, "validating /properties/"); ok {
			rest = "argument " + prop
		}
		name := req.(*sdk.CallToolRequest).Params.Name
		tc.Text = fmt.Sprintf("%s: invalid arguments: %s; check the tool's input schema and call it again", name, rest)
		return res, err
	}
}
