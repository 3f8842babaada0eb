// Package e2b serves E2B's API on Warden's listener, so that E2B's own
// SDKs, unmodified, create and drive Warden sessions: set E2B_API_URL and
// E2B_SANDBOX_URL to `warden serve`'s address and E2B_API_KEY to a Warden
// API key.
//
// E2B's API has two planes. The control plane is REST with JSON bodies
// (POST /sandboxes, GET /v2/sandboxes, ...), authenticated by the
// X-API-Key header; an E2B API key is a Warden API key, and each key is
// its own tenant. The data plane is what runs inside a sandbox: envd's
// Connect services (process.Process, filesystem.Filesystem), its /files
// and /health routes, and the code interpreter. With E2B_SANDBOX_URL set
// the SDK sends every data-plane call to that one URL and names the
// sandbox in the E2b-Sandbox-Id header and the service in E2b-Sandbox-Port
// (49983 envd, 49999 code interpreter).
//
// Routing: Server.Handler takes every request with an E2b-Sandbox-Id
// header as a data-plane call, and the control plane's paths as control
// calls; everything else goes on to Warden's own API. A data-plane call
// must carry the sandbox's envd access token (X-Access-Token), a random
// secret made per sandbox and returned only to the key that created it;
// the router compares it in constant time and answers a wrong token
// exactly as an unknown id, so nobody learns which ids exist. Handlers
// then find the checked sandbox with sandboxFrom and act as its owner.
// The API key never enters a sandbox.
//
// An E2B sandbox is a Warden session: the sandbox id is the session id,
// and the session keeps Warden's limits, tenancy, network policy and
// expiry. The registry here only adds what E2B says about a sandbox
// (template, tokens, metadata) and forgets it once the session is gone.
package e2b
