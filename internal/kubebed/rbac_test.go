package kubebed_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warden-sandbox/warden/internal/kubebed"
)

// testRouterRBAC installs the router's namespaces and RBAC from
// deploy/kustomize/warden and asks the API server's authorizer what the
// router's service account may do: what the router needs, and nothing
// next to it (other verbs, Secrets, exec, other namespaces).
func testRouterRBAC(t *testing.T, bed *kubebed.Bed) {
	root, err := kubebed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy", "kustomize", "warden")
	objs, err := kubebed.ReadManifests(filepath.Join(dir, "namespaces.yaml"), filepath.Join(dir, "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bed.Apply(ctx, false, objs...); err != nil {
		t.Fatal(err)
	}
	const sandboxes = "warden-sandboxes"
	tests := []struct {
		verb, group, resource, sub, ns string
		want                           bool
	}{
		{"create", "extensions.agents.x-k8s.io", "sandboxclaims", "", sandboxes, true},
		{"patch", "extensions.agents.x-k8s.io", "sandboxclaims", "", sandboxes, true},
		{"delete", "extensions.agents.x-k8s.io", "sandboxclaims", "", sandboxes, true},
		{"get", "agents.x-k8s.io", "sandboxes", "", sandboxes, true},
		{"watch", "agents.x-k8s.io", "sandboxes", "", sandboxes, false},
		{"list", "", "pods", "", sandboxes, true},
		{"list", "extensions.agents.x-k8s.io", "sandboxwarmpools", "", sandboxes, false},
		{"get", "extensions.agents.x-k8s.io", "sandboxtemplates", "", sandboxes, false},
		{"update", "extensions.agents.x-k8s.io", "sandboxclaims", "status", sandboxes, false},
		{"update", "extensions.agents.x-k8s.io", "sandboxtemplates", "", sandboxes, false},
		{"create", "agents.x-k8s.io", "sandboxes", "", sandboxes, false},
		{"create", "extensions.agents.x-k8s.io", "sandboxtemplates", "", sandboxes, false},
		{"create", "extensions.agents.x-k8s.io", "sandboxwarmpools", "", sandboxes, false},
		{"delete", "agents.x-k8s.io", "sandboxes", "", sandboxes, false},
		{"delete", "", "pods", "", sandboxes, false},
		{"create", "", "pods", "exec", sandboxes, false},
		{"get", "", "secrets", "", sandboxes, false},
		{"create", "extensions.agents.x-k8s.io", "sandboxclaims", "", "default", false},
		{"list", "extensions.agents.x-k8s.io", "sandboxclaims", "", "", false},
	}
	checkRouterRules(ctx, t, bed)
	for _, tt := range tests {
		review := &authv1.SubjectAccessReview{Spec: authv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:warden-system:warden-router",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:warden-system", "system:authenticated"},
			ResourceAttributes: &authv1.ResourceAttributes{
				Verb: tt.verb, Group: tt.group, Resource: tt.resource, Subresource: tt.sub, Namespace: tt.ns,
			},
		}}
		got, err := bed.Clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("asking the authorizer: %v", err)
		}
		if got.Status.Allowed != tt.want {
			t.Errorf("router may %s %s/%s %q in namespace %q: got %v, want %v", tt.verb, tt.group, tt.resource, tt.sub, tt.ns, got.Status.Allowed, tt.want)
		}
	}
}

// routerRules are the router Role's rules, exactly: a right added to
// deploy/ must be added here too, so that none slips in unreviewed.
var routerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"extensions.agents.x-k8s.io"}, Resources: []string{"sandboxclaims"}, Verbs: []string{"create", "delete", "get", "list", "watch", "patch"}},
	{APIGroups: []string{"agents.x-k8s.io"}, Resources: []string{"sandboxes"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
}

// checkRouterRules compares the router's Role, as the API server stores
// it, with routerRules.
func checkRouterRules(ctx context.Context, t *testing.T, bed *kubebed.Bed) {
	t.Helper()
	role, err := bed.Clientset.RbacV1().Roles("warden-sandboxes").Get(ctx, "warden-router", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the router's Role: %v", err)
	}
	if d := cmp.Diff(routerRules, role.Rules); d != "" {
		t.Errorf("router Role's rules differ from the reviewed list (-want +got):\n%s", d)
	}
}
