#!/bin/sh
# generate.sh writes the Go code of E2B's envd services from the .proto
# files next to it into OUT (default: internal/e2b, where the code lives).
# It needs protoc (Debian: protobuf-compiler) and builds protoc-gen-go and
# protoc-gen-connect-go from the versions pinned as tools in go.mod, so the
# output depends only on the repository and protoc's version.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/..}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/" google.golang.org/protobuf/cmd/protoc-gen-go connectrpc.com/connect/cmd/protoc-gen-connect-go
module=github.com/warden-sandbox/warden/internal/e2b
PATH="$bin:$PATH" protoc -I "$here" \
	--go_out="$out" --go_opt=module=$module \
	--connect-go_out="$out" --connect-go_opt=module=$module \
	process/process.proto filesystem/filesystem.proto
