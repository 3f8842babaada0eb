// Package sdk is the Go client for Warden's HTTP API (`warden serve`), which
// runs untrusted code in Linux sandboxes.
//
// Most callers want the helpers: [New] connects, [Client.NewSession] starts
// a long-lived sandbox, and [Session] runs commands and notebook-style code
// in it and moves files in and out:
//
//	c, err := sdk.New("http://127.0.0.1:8080", sdk.WithAPIKey(key))
//	s, err := c.NewSession(ctx, nil)
//	defer s.Close(ctx)
//	res, err := s.RunCode(ctx, sdk.LanguagePython, "x = 21\nx * 2")
//	fmt.Println(res.Value) // 42
//
// The models (Result, ExecRequest, Limits, ...) and the low-level
// [RawClient] and [ClientWithResponses] are generated from api/openapi.yaml
// by oapi-codegen into client.gen.go; [Client.API] reaches them for the
// endpoints the helpers do not wrap. Errors the server answers are
// [*APIError]s, which match the Err* sentinels with [errors.Is].
package sdk
