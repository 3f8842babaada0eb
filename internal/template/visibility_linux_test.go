//go:build linux && !slim

package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// names is the names ListFor(tenant) gives.
func names(t *testing.T, s *Store, tenant string) []string {
	t.Helper()
	infos, err := s.ListFor(tenant)
	if err != nil {
		t.Fatalf("ListFor(%q): %v", tenant, err)
	}
	var out []string
	for _, i := range infos {
		out = append(out, i.Name)
	}
	return out
}

// TestShareLegacyCommit: a commit whose template.json has no shared_with
// (all made before Warden recorded it) is no tenant's, yet listed and
// leased for the operator, until Share sets it.
func TestShareLegacyCommit(t *testing.T) {
	s := openStore(t, Options{})
	importBase(t, s, "base")
	base, err := s.Get("base")
	if err != nil {
		t.Fatal(err)
	}
	const a = "aaaaaaaaaaaaaaaa"
	if _, err := s.Commit("base", base.Digest, bytes.NewReader(layerTar(t, file("added", "a's secret"))), "old", []string{a}); err != nil {
		t.Fatal(err)
	}
	meta := filepath.Join(s.templateDir("old"), "template.json")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	delete(raw, "shared_with")
	if b, err = json.Marshal(raw); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(meta, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{a, ""} {
		if got := names(t, s, tenant); !slices.Equal(got, []string{"base"}) {
			t.Errorf("legacy commit: ListFor(%q) = %q, want [base]", tenant, got)
		}
		if _, _, err := s.LeaseFor("old", tenant); !errors.Is(err, ErrNotFound) {
			t.Errorf("legacy commit: LeaseFor(old, %q) = %v, want not found", tenant, err)
		}
	}
	all, err := s.List()
	if err != nil || len(all) != 2 || all[1].ShareText() != unsetShare {
		t.Errorf("legacy commit: List = %v, %v; want base and old, unset", all, err)
	}
	_, release, err := s.Lease("old")
	if err != nil {
		t.Fatalf("legacy commit: the operator's Lease: %v", err)
	}
	release()
	if _, err := s.Share("old", []string{Keyless}); err == nil {
		t.Errorf("Share(old, [keyless]): nil error, want the literal refused")
	}
	if _, err := s.Share("old", []string{a}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, s, a); !slices.Equal(got, []string{"base", "old"}) {
		t.Errorf("after Share: ListFor(a) = %q, want [base old]", got)
	}
	if got, err := s.Get("old"); err != nil || !slices.Equal(got.SharedWith, []string{a}) || got.Digest == "" {
		t.Errorf("after Share: Get(old) = %+v, %v; want its record, shared with a", got, err)
	}
	if _, err := s.Share("nope", []string{a}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Share(nope) = %v, want not found", err)
	}
}

// TestUnreadableForTenants: a template whose metadata is corrupt is left
// out of a tenant's list (the others still listed) and leases as a
// missing one, its name in no other template's error; the operator's
// List still reports it.
func TestUnreadableForTenants(t *testing.T) {
	s := openStore(t, Options{})
	importBase(t, s, "base")
	if err := os.MkdirAll(s.templateDir("broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.templateDir("broken"), "template.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := names(t, s, "aaaaaaaaaaaaaaaa"); !slices.Equal(got, []string{"base"}) {
		t.Errorf("ListFor with a broken template = %q, want [base]", got)
	}
	_, _, broken := s.LeaseFor("broken", "aaaaaaaaaaaaaaaa")
	_, _, missing := s.LeaseFor("nope", "aaaaaaaaaaaaaaaa")
	if want := strings.ReplaceAll(fmt.Sprint(missing), `"nope"`, `"broken"`); fmt.Sprint(broken) != want {
		t.Errorf("LeaseFor(broken) = %v, want the missing template's %q", broken, want)
	}
	if _, err := s.List(); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Errorf("List with a broken template = %v, want its error", err)
	}
}
