package mcp

import (
	"fmt"
	"slices"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/interp"
)

// TestMCPLanguagesOneList: run_code offers exactly interp's languages, in
// its order, so a model is never offered one the sandbox refuses.
func TestMCPLanguagesOneList(t *testing.T) {
	list := listTools(t)
	i := slices.IndexFunc(list.Tools, func(tool *sdk.Tool) bool { return tool.Name == "run_code" })
	if i < 0 {
		t.Fatal("no run_code tool")
	}
	props, _ := list.Tools[i].InputSchema.(map[string]any)["properties"].(map[string]any)
	lang, _ := props["language"].(map[string]any)
	enum, _ := lang["enum"].([]any)
	var got []string
	for _, e := range enum {
		got = append(got, fmt.Sprint(e))
	}
	if want := interp.Languages(); !slices.Equal(got, want) {
		t.Errorf("run_code language enum = %v, want interp.Languages() %v", got, want)
	}
}
