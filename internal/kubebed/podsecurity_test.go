package kubebed_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warden-sandbox/warden/internal/kubebed"
)

// testPodSecurity applies deploy/'s namespaces (Pod Security's
// restricted profile enforced) and RuntimeClass for real and has the
// API server admit, by a dry-run create, a Pod of the default
// template's spec in warden-sandboxes; the same Pod without its
// securityContexts must be refused, which shows the profile is
// enforced, not only labelled.
func testPodSecurity(t *testing.T, bed *kubebed.Bed) {
	root, err := kubebed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy", "kustomize", "warden")
	objs, err := kubebed.ReadManifests(filepath.Join(dir, "namespaces.yaml"), filepath.Join(dir, "runtimeclass.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const ns = "warden-sandboxes"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bed.Apply(ctx, false, objs...); err != nil {
		t.Fatal(err)
	}
	// The bed runs no service-account controller, which would make it.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := bed.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	hardened := defaultTemplate(t).Spec.PodTemplate.Spec
	loose := *hardened.DeepCopy()
	loose.SecurityContext = nil
	for i := range loose.Containers {
		loose.Containers[i].SecurityContext = nil
	}
	tests := []struct {
		name  string
		spec  corev1.PodSpec
		admit bool
	}{
		{"default template", hardened, true},
		{"without securityContexts", loose, false},
	}
	for _, tt := range tests {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "psa-check", Namespace: ns}, Spec: tt.spec}
		_, err := bed.Clientset.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if got := err == nil; got != tt.admit {
			t.Errorf("%s: admitted %v (%v), want %v", tt.name, got, err, tt.admit)
		}
		if err != nil && !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Errorf("%s: refused for another reason than Pod Security: %v", tt.name, err)
		}
	}
}
