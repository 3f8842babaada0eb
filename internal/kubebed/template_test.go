package kubebed_test

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/spec"
)

// defaultTemplate reads deploy/'s default SandboxTemplate (helm's equals
// it: TestBed/install).
func defaultTemplate(t *testing.T) *extv1.SandboxTemplate {
	t.Helper()
	root, err := kubebed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kubebed.ReadManifests(filepath.Join(root, "deploy", "kustomize", "warden", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "SandboxTemplate" && o.GetName() == "default" {
			var tmpl extv1.SandboxTemplate
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &tmpl); err != nil {
				t.Fatalf("decoding the default SandboxTemplate: %v", err)
			}
			return &tmpl
		}
	}
	t.Fatal("deploy/kustomize/warden/template.yaml has no SandboxTemplate named default")
	return nil
}

// TestTemplateLimitsMirrorDefaults keeps one source of truth for a
// sandbox's size: the default template's Pod gets Warden's own default
// limits (spec.DefaultLimits), and its writable volumes, which share
// the ephemeral-storage limit as Warden's /workspace, /tmp and HOME share
// DiskBytes, are each no larger.
func TestTemplateLimitsMirrorDefaults(t *testing.T) {
	pod := defaultTemplate(t).Spec.PodTemplate.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("default template has %d containers, want 1 (Warden's init)", len(pod.Containers))
	}
	limits := pod.Containers[0].Resources.Limits
	d := spec.DefaultLimits
	tests := []struct {
		name corev1.ResourceName
		want *resource.Quantity
	}{
		{corev1.ResourceCPU, resource.NewMilliQuantity(int64(d.CPUs*1000), resource.DecimalSI)},
		{corev1.ResourceMemory, resource.NewQuantity(d.MemoryBytes, resource.BinarySI)},
		{corev1.ResourceEphemeralStorage, resource.NewQuantity(d.DiskBytes, resource.BinarySI)},
	}
	for _, tt := range tests {
		got, ok := limits[tt.name]
		if !ok || got.Cmp(*tt.want) != 0 {
			t.Errorf("default template's %s limit: got %v, want %v (spec.DefaultLimits)", tt.name, got.String(), tt.want.String())
		}
	}
	for _, v := range pod.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
			t.Errorf("volume %q: want an emptyDir with a sizeLimit", v.Name)
			continue
		}
		if v.EmptyDir.SizeLimit.Value() > d.DiskBytes {
			t.Errorf("volume %q: sizeLimit %v, want at most spec.DefaultLimits' disk %d", v.Name, v.EmptyDir.SizeLimit, d.DiskBytes)
		}
	}
}
