package podclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// errGone is a delete that found the claim gone, or changed since it
// was read (a precondition failed): both harmless to a reaper, which
// decides again on its next pass.
var errGone = errors.New("claim gone or changed since read")

// deleteClaim deletes claim name, only if its UID (if not "", and then
// its resource version if rv is not "") still match; the garbage collector then takes
// its Sandbox and Pod.
func (c *Claimer) deleteClaim(ctx context.Context, name string, uid types.UID, rv string) error {
	bg := metav1.DeletePropagationBackground
	opts := &metav1.DeleteOptions{PropagationPolicy: &bg}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
		if rv != "" {
			opts.Preconditions.ResourceVersion = &rv
		}
	}
	err := c.ext.Delete().Namespace(c.cfg.Namespace).Resource(claimsResource).Name(name).Body(opts).Do(ctx).Error()
	c.forget(name)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return fmt.Errorf("deleting claim %s: %w: %w", name, errGone, err)
	}
	if err != nil {
		return fmt.Errorf("deleting claim %s: %w", name, err)
	}
	return nil
}

// Release deletes session s's claim (as Find or Claim returned it), at
// the session's delete, only if it is still that claim (a UID
// precondition): a claim made since under the same name is left alone.
// Its Sandbox and Pod go with it (WaitPodGone waits for that). A session
// already released is ErrNotFound, which a caller may ignore: deletes
// are idempotent.
func (c *Claimer) Release(ctx context.Context, s *Session) error {
	if s.claimUID == "" {
		return fmt.Errorf("releasing session %q: it has no claim UID: release what Find or Claim returned", s.ID)
	}
	err := c.deleteClaim(ctx, s.Claim, s.claimUID, "")
	if errors.Is(err, errGone) {
		return fmt.Errorf("releasing session %q: %w", s.ID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("releasing session %q: %w", s.ID, err)
	}
	return nil
}

// WaitPodGone waits, by a watch bounded by ctx, until session s's Pod is
// deleted (or replaced by another under its name).
func (c *Claimer) WaitPodGone(ctx context.Context, s *Session) error {
	pods := c.pods.CoreV1().Pods(c.cfg.Namespace)
	pod, err := pods.Get(ctx, s.Pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && pod.UID != s.PodUID) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading session %q's Pod %s: %w", s.ID, s.Pod, err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", s.Pod).String(), ResourceVersion: pod.ResourceVersion,
	})
	if err != nil {
		return fmt.Errorf("watching session %q's Pod %s: %w", s.ID, s.Pod, err)
	}
	defer w.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the watch of session %q's Pod %s ended before it was deleted", s.ID, s.Pod)
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && (ev.Type == watch.Deleted || p.UID != s.PodUID) {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("session %q's Pod %s is still there: %w", s.ID, s.Pod, ctx.Err())
		}
	}
}

// sweepAt is how many activity entries a Claimer keeps before it drops
// those older than the interval (which no longer hold back a write); it
// does so at most once per interval, so the scan costs O(1) per Touch
// on average however many sessions are active.
const sweepAt = 1024

// Touch records activity on session s (as Find or Claim returned it) for
// its idle timeout. It writes the claim's ActiveAnnotation (one merge
// patch, conditional on the claim's UID) only when this replica has not
// written it within Config.ActivityInterval: a session busy with execs
// costs one write per interval per replica serving it, not one per exec.
// The first Touch after Claim within the interval writes nothing, as
// Claim wrote the time. When this Touch writes, a session gone (or its
// claim replaced by another of the same name) is ErrNotFound; when it
// does not write, it calls nothing and returns nil.
func (c *Claimer) Touch(ctx context.Context, s *Session) error {
	if s.claimUID == "" {
		return fmt.Errorf("recording session %q's activity: it has no claim UID: touch what Find or Claim returned", s.ID)
	}
	name, now := s.Claim, time.Now().UTC()
	if !c.due(name, now) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": s.claimUID, "annotations": map[string]string{ActiveAnnotation: now.Format(time.RFC3339Nano)},
	}})
	if err != nil {
		return fmt.Errorf("encoding session %q's activity: %w", s.ID, err)
	}
	err = c.ext.Patch(types.MergePatchType).Namespace(c.cfg.Namespace).Resource(claimsResource).Name(name).Body(patch).Do(ctx).Error()
	if err == nil {
		return nil
	}
	c.forget(name)
	if apierrors.IsNotFound(err) || uidChanged(err) {
		return fmt.Errorf("recording session %q's activity: %w", s.ID, ErrNotFound)
	}
	return fmt.Errorf("recording session %q's activity on claim %s: %w", s.ID, name, err)
}

// uidChanged is whether err is the API server's refusal of a merge
// patch whose metadata.uid is not the claim's: a claim replaced under
// the same name. A PATCH takes no UID precondition, so the server
// refuses the immutable field's change in validation, a 422 Invalid
// naming metadata.uid; a 409 Conflict is taken the same way, should a
// server check it as a precondition.
func uidChanged(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) || st.Status().Details == nil {
		return false
	}
	for _, c := range st.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// due is whether claim name's activity is to be written at now, which
// it then notes as written.
func (c *Claimer) due(name string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.written[name]) < c.cfg.ActivityInterval {
		return false
	}
	c.written[name] = now
	if len(c.written) > sweepAt && now.Sub(c.swept) >= c.cfg.ActivityInterval {
		c.sweep(now)
		c.swept = now
	}
	return true
}

// noteWritten notes that this replica wrote claim name's activity at t.
func (c *Claimer) noteWritten(name string, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[name] = t
}

// forget drops claim name's activity entry (released, or a write failed
// and the next Touch must try again).
func (c *Claimer) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.written, name)
}

// sweep drops entries older than the interval; c.mu is held.
func (c *Claimer) sweep(now time.Time) {
	for name, t := range c.written {
		if now.Sub(t) >= c.cfg.ActivityInterval {
			delete(c.written, name)
		}
	}
}
