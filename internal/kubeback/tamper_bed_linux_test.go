package kubeback_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// testTamperedNetwork: whoever may patch claims (here the bed's admin)
// cannot change a session's egress. A --net none session's record
// rewritten to --net proxy, its seal kept, is refused by the replica
// that re-attaches the session: ErrDead, saying the record was edited
// outside Warden, and the Pod is never attached with the forged rules.
// Once the record Warden wrote is put back, another replica serves the
// session again, so the refusal was the record's alone.
func testTamperedNetwork(ctx context.Context, t *testing.T, bed *kubebed.Bed) {
	first, _ := replica(t, bed)
	info := create(ctx, t, first, time.Hour)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	var claim extv1.SandboxClaim
	if err := bed.Extensions.Get().Namespace(ns).Resource("sandboxclaims").Name(podclaim.ClaimName(info.ID)).Do(ctx).Into(&claim); err != nil {
		t.Fatal(err)
	}
	good := claim.Annotations[podclaim.NetworkAnnotation]
	i := strings.LastIndex(good, `.{"mode":"none"}`)
	if i < 0 {
		t.Fatalf("the claim records the network %q, want a sealed --net none record", good)
	}
	setNetwork(ctx, t, bed, info.ID, good[:i]+`.{"mode":"proxy","allow":["allowed.test"]}`)
	second, _ := replica(t, bed)
	_, err := second.Exec(ctx, owner, info.ID, sh("true"), sandbox.Stream{})
	if !errors.Is(err, sandbox.ErrDead) || !strings.Contains(err.Error(), "edited outside Warden") {
		t.Errorf("exec after the record was rewritten to --net proxy: got %v, want ErrDead saying the claim was edited outside Warden", err)
	}
	setNetwork(ctx, t, bed, info.ID, good)
	third, _ := replica(t, bed)
	run(ctx, t, third, info.ID, sh("true"))
	if err := third.Delete(ctx, owner, info.ID); err != nil {
		t.Fatal(err)
	}
}

// setNetwork writes v as session id's network record, as anyone who may
// patch claims can.
func setNetwork(ctx context.Context, t *testing.T, bed *kubebed.Bed, id, v string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{podclaim.NetworkAnnotation: v}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bed.Extensions.Patch(types.MergePatchType).Namespace(ns).Resource("sandboxclaims").Name(podclaim.ClaimName(id)).Body(patch).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
}
