package kubebed

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WardenDir is where the repository keeps Warden's side of the install,
// relative to its root.
const WardenDir = "deploy/kustomize/warden"

// SandboxNamespace is deploy/'s namespace of sandbox Pods, where the
// router's Role is.
const SandboxNamespace = "warden-sandboxes"

// routerManifests are the files of WardenDir a router's tests need: the
// namespaces, the router's RBAC, the RuntimeClass, and the default
// template and warm pool.
var routerManifests = []string{"namespaces.yaml", "rbac.yaml", "runtimeclass.yaml", "template.yaml"}

// InstallWarden applies deploy/'s namespaces, router RBAC, RuntimeClass
// and default template and warm pool, and makes the sandbox namespace's
// default service account (the bed runs no controller that would make
// it): what the tests of a router (podclaim, kubeback) run against. It
// does not wait for the warm pool to fill.
func (b *Bed) InstallWarden(ctx context.Context) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	var paths []string
	for _, f := range routerManifests {
		paths = append(paths, filepath.Join(root, WardenDir, f))
	}
	objs, err := ReadManifests(paths...)
	if err != nil {
		return err
	}
	if err := b.Apply(ctx, false, objs...); err != nil {
		return fmt.Errorf("applying %s: %w", WardenDir, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	_, err = b.Clientset.CoreV1().ServiceAccounts(SandboxNamespace).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("making %s's default service account: %w", SandboxNamespace, err)
	}
	return nil
}
