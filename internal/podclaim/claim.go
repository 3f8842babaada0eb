package podclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/spec"
)

// claimsResource is the SandboxClaims' API resource.
const claimsResource = "sandboxclaims"

// readyCondition is the claim's condition that mirrors its Sandbox's
// readiness: True once the Pod is Ready and has an IP.
const readyCondition = string(sandboxv1.SandboxConditionReady)

// hopeless are the Ready condition's reasons that no wait will cure:
// the claim is released at once and the reason reported.
var hopeless = map[string]string{
	"WarmPoolNotFound":          "create a SandboxWarmPool named as the template",
	"TemplateNotFound":          "create the SandboxTemplate the warm pool names",
	"InvalidMetadata":           "fix the claim's metadata",
	"VolumeClaimTemplatesError": "fix the template's volume claims",
}

// Claim creates a SandboxClaim for r against the warm pool of r's
// template, waits (bounded by Config.ReadyTimeout, by a watch) until it
// is Ready with a Pod IP, and records the Pod it got on the claim. A
// claim that fails is released before Claim returns.
func (c *Claimer) Claim(ctx context.Context, r Request) (*Session, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	claim, err := newClaim(c.cfg.Namespace, &r, time.Now())
	if err != nil {
		return nil, err
	}
	w, created, err := c.createWatched(ctx, claim, r.Session)
	if err != nil {
		return nil, err
	}
	s, err := c.awaitPod(ctx, w, created, r.Session, r.Network)
	if err != nil {
		c.releaseFailed(created, err)
		return nil, err
	}
	return s, nil
}

// createWatched creates claim and opens a watch of it, at once rather
// than one after the other: at resource version "0" (the cache as it
// is, docs/kubernetes.md: the bed's etcd) the watch starts with the
// claim's state as the cache has it and then every change, so whichever
// of the two lands first no change is missed, and a claim costs one
// round trip less. A claim made whose watch failed is released.
func (c *Claimer) createWatched(ctx context.Context, claim *extv1.SandboxClaim, session string) (watch.Interface, *extv1.SandboxClaim, error) {
	type opened struct {
		w   watch.Interface
		err error
	}
	watched := make(chan opened, 1)
	go func() {
		w, err := c.watchClaim(ctx, claim.Name, "0")
		watched <- opened{w, err}
	}()
	var created extv1.SandboxClaim
	createErr := c.ext.Post().Namespace(c.cfg.Namespace).Resource(claimsResource).Body(claim).Do(ctx).Into(&created)
	o := <-watched
	if createErr != nil {
		if o.w != nil {
			o.w.Stop()
		}
		return nil, nil, fmt.Errorf("creating claim %s for session %q: %w", claim.Name, session, createErr)
	}
	if o.err != nil {
		c.releaseFailed(&created, o.err)
		return nil, nil, o.err
	}
	return o.w, &created, nil
}

// newClaim is the claim of r, made at now.
func newClaim(ns string, r *Request, now time.Time) (*extv1.SandboxClaim, error) {
	limits, err := json.Marshal(r.Limits)
	if err != nil {
		return nil, fmt.Errorf("encoding session %q's limits: %w", r.Session, err)
	}
	return &extv1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: ClaimName(r.Session), Namespace: ns,
			Labels: map[string]string{
				ManagedLabel: managedValue, SessionLabel: ClaimName(r.Session), OwnerLabel: r.Owner, TemplateLabel: r.Template,
			},
			Annotations: map[string]string{
				SessionAnnotation: r.Session,
				IdleAnnotation:    r.IdleTimeout.String(),
				ActiveAnnotation:  now.UTC().Format(time.RFC3339Nano),
				LimitsAnnotation:  string(limits),
			},
		},
		Spec: extv1.SandboxClaimSpec{
			WarmPoolRef: extv1.SandboxWarmPoolRef{Name: r.Template},
			Lifecycle: &extv1.Lifecycle{
				ShutdownTime:   &metav1.Time{Time: now.Add(r.TTL)},
				ShutdownPolicy: extv1.ShutdownPolicyDelete,
			},
		},
	}, nil
}

// watchClaim watches the claim named name from resource version rv.
func (c *Claimer) watchClaim(ctx context.Context, name, rv string) (watch.Interface, error) {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv, Watch: true}
	w, err := c.ext.Get().Namespace(c.cfg.Namespace).Resource(claimsResource).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
	if err != nil {
		return nil, fmt.Errorf("watching claim %s: %w", name, err)
	}
	return w, nil
}

// maxRewatch bounds how many times awaitPod re-watches a watch the
// server ended, and rewatchPause is the pause before each, so a watch
// that keeps closing at once is not a tight loop of requests.
const (
	maxRewatch   = 10
	rewatchPause = 200 * time.Millisecond
)

// awaitPod waits for the claim's Ready condition on w, which it stops
// (re-watching, a bounded number of times, should the server end it),
// then finds and records the claim's Pod. Events of another claim of the
// same name (an earlier one, replayed from the watch cache) are skipped:
// only the created claim's UID counts. n is session id's network
// policy, recorded with the Pod and sealed for id (the request's, not
// what the watched claim says: whoever may edit claims writes that).
func (c *Claimer) awaitPod(ctx context.Context, w watch.Interface, claim *extv1.SandboxClaim, id string, n spec.NetworkPolicy) (*Session, error) {
	defer func() { w.Stop() }()
	last, rewatches := claim, 0
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				next, err := c.rewatch(ctx, last, &rewatches)
				if err != nil {
					return nil, err
				}
				w = next
				continue
			}
			got, err := claimEvent(ev, claim)
			if err != nil {
				return nil, err
			}
			if got == nil {
				continue
			}
			last = got
			done, err := readyOrHopeless(got)
			if err != nil {
				return nil, err
			}
			if done {
				return c.record(ctx, got, id, n)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("claim %s was not Ready in time (%s): %w", claim.Name, conditionText(last), ctx.Err())
		}
	}
}

// rewatch watches the claim again from last's resource version, after a
// pause, failing once the server has ended maxRewatch watches.
func (c *Claimer) rewatch(ctx context.Context, last *extv1.SandboxClaim, n *int) (watch.Interface, error) {
	if *n++; *n > maxRewatch {
		return nil, fmt.Errorf("watching claim %s: the API server ended %d watches: check its health", last.Name, maxRewatch)
	}
	select {
	case <-time.After(rewatchPause):
	case <-ctx.Done():
		return nil, fmt.Errorf("claim %s was not Ready in time (%s): %w", last.Name, conditionText(last), ctx.Err())
	}
	return c.watchClaim(ctx, last.Name, last.ResourceVersion)
}

// claimEvent is the created claim as an event carries it, nil for a
// bookmark or an event of another claim of the same name (another UID);
// an error event, or the created claim's deletion before it was Ready,
// is an error.
func claimEvent(ev watch.Event, created *extv1.SandboxClaim) (*extv1.SandboxClaim, error) {
	switch ev.Type {
	case watch.Error:
		return nil, fmt.Errorf("watching claim %s: %v", created.Name, apiStatus(ev.Object))
	case watch.Bookmark:
		return nil, nil
	}
	got, ok := ev.Object.(*extv1.SandboxClaim)
	if !ok {
		return nil, fmt.Errorf("watching claim %s: got a %T, want a SandboxClaim", created.Name, ev.Object)
	}
	if got.UID != created.UID {
		return nil, nil
	}
	if ev.Type == watch.Deleted {
		return nil, fmt.Errorf("claim %s was deleted before it was Ready", created.Name)
	}
	return got, nil
}

// apiStatus is the message of a watch's error event.
func apiStatus(o any) string {
	if s, ok := o.(*metav1.Status); ok {
		return s.Message
	}
	return fmt.Sprintf("%T", o)
}

// readyOrHopeless is true once the claim is Ready, and an error when
// its condition says no wait helps.
func readyOrHopeless(claim *extv1.SandboxClaim) (bool, error) {
	cond := apimeta.FindStatusCondition(claim.Status.Conditions, readyCondition)
	if cond == nil {
		return false, nil
	}
	if fix, ok := hopeless[cond.Reason]; ok {
		return false, fmt.Errorf("claim %s cannot be served (%s: %s): %s", claim.Name, cond.Reason, cond.Message, fix)
	}
	return cond.Status == metav1.ConditionTrue && len(claim.Status.SandboxStatus.PodIPs) > 0, nil
}

// conditionText describes the claim's Ready condition for an error.
func conditionText(claim *extv1.SandboxClaim) string {
	cond := apimeta.FindStatusCondition(claim.Status.Conditions, readyCondition)
	if cond == nil {
		return "no Ready condition yet"
	}
	return fmt.Sprintf("Ready %s, %s: %s", cond.Status, cond.Reason, cond.Message)
}

// releaseFailed deletes a claim that failed, logging a failure to: the
// caller's context may be what ended, so it gets a bounded one of its own.
func (c *Claimer) releaseFailed(claim *extv1.SandboxClaim, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.deleteClaim(ctx, claim.Name, claim.UID, ""); err != nil {
		c.log.Warn("releasing a claim that failed", "claim", claim.Name, "cause", cause, "err", err)
	}
}
