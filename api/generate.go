// Package api holds Warden's HTTP contract, openapi.yaml, from which the
// server interface (internal/server/apigen) and the Go SDK client (sdk) are
// generated. Run `go generate ./api` after editing the spec and commit the
// results: builds and CI never run the generator, and TestGeneratedUpToDate
// fails when the committed code no longer matches the spec.
package api

import _ "embed"

//go:generate go tool oapi-codegen -config server.cfg.yaml -o ../internal/server/apigen/server.gen.go openapi.yaml
//go:generate go tool oapi-codegen -config sdk.cfg.yaml -o ../sdk/client.gen.go openapi.yaml

// OpenAPIYAML is openapi.yaml byte for byte, for the server to answer
// GET /openapi.yaml with the document as written (comments, order and all)
// rather than a re-serialisation of the parsed spec.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte
