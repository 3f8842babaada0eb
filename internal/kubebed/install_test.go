package kubebed_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// agentSandboxRequire finds the agent-sandbox version a go.mod requires.
var agentSandboxRequire = regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/agent-sandbox (v\S+)`)

// TestAgentSandboxManifestsPinned checks that the main module and the
// tools module pin the same agent-sandbox, and that deploy/'s copy of its
// manifests is that version's, byte for byte: the bed's CRDs, the
// controller it runs and the Go types its tests use are one release.
func TestAgentSandboxManifestsPinned(t *testing.T) {
	root, err := kubebed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, mod := range []string{"go.mod", "tools/kube/go.mod"} {
		b, err := os.ReadFile(filepath.Join(root, mod))
		if err != nil {
			t.Fatal(err)
		}
		m := agentSandboxRequire.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s does not require sigs.k8s.io/agent-sandbox", mod)
		}
		versions = append(versions, string(m[1]))
	}
	if versions[0] != versions[1] {
		t.Fatalf("go.mod pins agent-sandbox %s, tools/kube/go.mod %s: pin one version in both", versions[0], versions[1])
	}
	for file, tag := range controllerTags(t, root) {
		if tag != versions[0] {
			t.Errorf("%s runs agent-sandbox's controller image %s, go.mod pins %s: set the tag to the pin", file, tag, versions[0])
		}
	}
	goBin := testhost.RequireTool(t, "go")
	cmd := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/agent-sandbox")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("finding agent-sandbox's source: %v", err)
	}
	module := filepath.Join(strings.TrimSpace(string(out)), "k8s")
	ours := filepath.Join(root, kubebed.AgentSandboxDir)
	err = filepath.WalkDir(ours, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "SOURCE" {
			return err
		}
		rel, _ := filepath.Rel(ours, path)
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		want, err := os.ReadFile(filepath.Join(module, rel))
		if err != nil {
			t.Errorf("%s: not in agent-sandbox %s: %v", rel, versions[0], err)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from agent-sandbox %s's k8s/%s: copy it again", rel, versions[0], rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// controllerImage is agent-sandbox's controller image as the install
// names it.
const controllerImage = "registry.k8s.io/agent-sandbox/agent-sandbox-controller"

// controllerTags reads the tag of agent-sandbox's controller image that
// deploy/kustomize's kustomization and the Helm chart's values install,
// by file.
func controllerTags(t *testing.T, root string) map[string]string {
	t.Helper()
	var kustomization struct {
		Images []struct{ NewName, NewTag string }
	}
	var values struct {
		AgentSandboxImage struct{ Repository, Tag string } `json:"agentSandboxImage"`
	}
	files := []struct {
		path string
		into any
	}{
		{"deploy/kustomize/kustomization.yaml", &kustomization},
		{"deploy/helm/warden/values.yaml", &values},
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f.path))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, f.into); err != nil {
			t.Fatalf("decoding %s: %v", f.path, err)
		}
	}
	tags := map[string]string{files[1].path: values.AgentSandboxImage.Tag}
	if values.AgentSandboxImage.Repository != controllerImage {
		t.Errorf("%s: agentSandboxImage.repository %q, want %q", files[1].path, values.AgentSandboxImage.Repository, controllerImage)
	}
	for _, img := range kustomization.Images {
		if img.NewName == controllerImage {
			tags[files[0].path] = img.NewTag
		}
	}
	if _, ok := tags[files[0].path]; !ok {
		t.Errorf("%s: no images entry sets %s: add one with the pinned tag", files[0].path, controllerImage)
	}
	return tags
}

// testInstall renders the install manifests (kustomize build of
// deploy/kustomize, helm template of deploy/helm/warden, which must name
// the same objects, after helm lint) and has the bed's API server check
// every object by a server-side dry run: schemas, CRDs' included,
// defaulting and admission. Namespaces are created for real first, as a
// dry run of objects in a namespace that does not exist fails.
func testInstall(t *testing.T, bed *kubebed.Bed) {
	root, err := kubebed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "deploy", "helm", "warden")
	render(t, "helm", "lint", "--strict", chart)
	kustomized := decode(t, "kustomize", render(t, "kustomize", "build", filepath.Join(root, "deploy", "kustomize")))
	helmed := decode(t, "helm", render(t, "helm", "template", "warden", chart, "--include-crds"))
	if got, want := identities(helmed), identities(kustomized); !slices.Equal(got, want) {
		t.Errorf("helm template renders\n%s\nkustomize build renders\n%s\nwant the same objects", strings.Join(got, "\n"), strings.Join(want, "\n"))
	} else {
		sameObjects(t, helmed, kustomized)
	}
	for _, r := range []struct {
		name string
		objs []*unstructured.Unstructured
	}{{"kustomize", kustomized}, {"helm", helmed}} {
		t.Run(r.name, func(t *testing.T) { dryRun(t, bed, r.objs) })
	}
}

// dryRun creates objs' namespaces and dry-runs the rest.
func dryRun(t *testing.T, bed *kubebed.Bed, objs []*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ns, rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			ns = append(ns, o)
		} else {
			rest = append(rest, o)
		}
	}
	if err := bed.Apply(ctx, false, ns...); err != nil {
		t.Fatal(err)
	}
	if err := bed.Apply(ctx, true, rest...); err != nil {
		t.Fatalf("the API server's dry run refuses: %v", err)
	}
	if len(rest) < 20 {
		t.Errorf("%d objects besides namespaces, want agent-sandbox's and Warden's (over 20)", len(rest))
	}
}

// sameObjects checks that helm's objects equal kustomize's, field for
// field, once each list is sorted by identity.
func sameObjects(t *testing.T, helmed, kustomized []*unstructured.Unstructured) {
	t.Helper()
	byID := func(a, b *unstructured.Unstructured) int { return strings.Compare(identity(a), identity(b)) }
	slices.SortFunc(helmed, byID)
	slices.SortFunc(kustomized, byID)
	for i := range helmed {
		if d := cmp.Diff(kustomized[i].Object, helmed[i].Object); d != "" {
			t.Errorf("%s: helm's differs from kustomize's (-kustomize +helm):\n%s", identity(helmed[i]), d)
		}
	}
}

// identity is obj's kind, namespace and name.
func identity(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// identities are objs' kinds, namespaces and names, sorted.
func identities(objs []*unstructured.Unstructured) []string {
	ids := make([]string, 0, len(objs))
	for _, o := range objs {
		ids = append(ids, identity(o))
	}
	slices.Sort(ids)
	return ids
}

// decode decodes what name rendered.
func decode(t *testing.T, name string, out []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := kubebed.DecodeManifests(out)
	if err != nil {
		t.Fatalf("decoding %s's output: %v", name, err)
	}
	return objs
}

// render runs make kube-tools' tool name with args and returns its output.
func render(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	root, err := kubebed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "tools", "kube", name)
	if _, err := os.Stat(bin); err != nil {
		testhost.SkipOrFail(t, name+" is not built (make kube-tools builds it): "+err.Error())
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// TestRouterReadsItsSecrets: the router's Pod, as kustomize and helm
// render it, runs as 65532 with fsGroup 65532, without which the kubelet
// leaves the Secret volumes' 0400 files root's and the router cannot read
// its key (it crash-loops).
func TestRouterReadsItsSecrets(t *testing.T) {
	root, err := kubebed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		name string
		args []string
	}{
		{"kustomize", []string{"build", filepath.Join(root, "deploy", "kustomize")}},
		{"helm", []string{"template", "warden", filepath.Join(root, "deploy", "helm", "warden")}},
	} {
		t.Run(r.name, func(t *testing.T) {
			router := findObject(t, decode(t, r.name, render(t, r.name, r.args...)), "Deployment", "warden-router")
			for _, f := range []string{"runAsUser", "runAsGroup", "fsGroup"} {
				got, _, _ := unstructured.NestedFieldNoCopy(router.Object, "spec", "template", "spec", "securityContext", f)
				if fmt.Sprint(got) != "65532" {
					t.Errorf("the router Pod's securityContext.%s: got %v, want 65532", f, got)
				}
			}
		})
	}
}

// findObject is objs' object of kind and name, failing the test without one.
func findObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}
