package e2b

// The Go code of E2B's envd services (processpb, filesystempb and their
// Connect packages) is generated from proto/*.proto; see proto/generate.sh.
//go:generate sh proto/generate.sh
