package podclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// Reaped is one session a Reap released, and why.
type Reaped struct {
	// Session and Claim name it; Reason is one line: TTL, idle or dead.
	Session, Claim, Reason string
}

// ReapReport is what one Reap pass did.
type ReapReport struct {
	// Released are the claims this pass deleted.
	Released []Reaped
	// Raced counts claims another reaper (or a Touch) got to first: gone
	// or changed between the list and the delete, left for the next pass.
	Raced int
}

// Reap releases every Warden claim past its TTL, idle for longer than
// its idle timeout plus the activity interval, or whose Pod is dead. Any
// replica may run it, several at once: it reads claims and Pods (two
// paged LISTs) and deletes each claim only if it is unchanged since the
// list (UID and resource version preconditions), so a claim touched or
// deleted meanwhile is left alone and two reapers never release a
// session twice or one that just became active.
func (c *Claimer) Reap(ctx context.Context) (ReapReport, error) {
	var rep ReapReport
	claims, err := c.listClaims(ctx, "")
	if err != nil {
		return rep, fmt.Errorf("reaping: %w", err)
	}
	// Pods are listed after claims: a Pod recorded on a listed claim
	// existed before this list, so its absence means it was deleted.
	pods, err := c.listPods(ctx)
	if err != nil {
		return rep, fmt.Errorf("reaping: %w", err)
	}
	now := time.Now()
	var errs []error
	for i := range claims {
		claim := &claims[i]
		why := c.reapReason(claim, pods, now)
		if why == "" {
			continue
		}
		err := c.deleteClaim(ctx, claim.Name, claim.UID, claim.ResourceVersion)
		switch {
		case errors.Is(err, errGone):
			rep.Raced++
		case err != nil:
			errs = append(errs, err)
		default:
			rep.Released = append(rep.Released, Reaped{Session: claim.Annotations[SessionAnnotation], Claim: claim.Name, Reason: why})
		}
	}
	return rep, errors.Join(errs...)
}

// reapReason says why claim should be released now, or "" if not. A
// claim Warden cannot read is logged and kept: its TTL still ends it,
// as agent-sandbox's controller enforces the shutdownTime.
func (c *Claimer) reapReason(claim *extv1.SandboxClaim, pods map[string]*corev1.Pod, now time.Time) string {
	if claim.DeletionTimestamp != nil {
		return ""
	}
	s, err := sessionOf(claim)
	if err != nil {
		c.log.Warn("reaping: keeping a claim it cannot read until its TTL", "err", err)
		return ""
	}
	return reapDecision(s, pods, now, c.cfg.ActivityInterval)
}

// reapDecision is reapReason for a readable session s.
func reapDecision(s *Session, pods map[string]*corev1.Pod, now time.Time, interval time.Duration) string {
	if !s.Expires.IsZero() && !now.Before(s.Expires) {
		return fmt.Sprintf("TTL ended at %s", s.Expires.UTC().Format(time.RFC3339))
	}
	if idle := now.Sub(s.LastActive); idle > s.IdleTimeout+interval {
		return fmt.Sprintf("idle for %v (timeout %v)", idle.Truncate(time.Second), s.IdleTimeout)
	}
	if s.PodUID == "" {
		return ""
	}
	return podDeath(s, pods[s.Pod])
}

// sandboxSelector selects sandbox Pods: deploy/'s template labels them
// so (its NetworkPolicies select them by it too).
const sandboxSelector = sandboxLabel + "=" + sandboxComponent

// sandboxLabel and sandboxComponent are the label deploy/'s template
// puts on sandbox Pods.
const (
	sandboxLabel     = "app.kubernetes.io/component"
	sandboxComponent = "warden-sandbox"
)

// listPods lists the namespace's sandbox Pods in pages, by name: only
// those, so that a pass holds no other Pod in memory.
func (c *Claimer) listPods(ctx context.Context) (map[string]*corev1.Pod, error) {
	out := map[string]*corev1.Pod{}
	opts := metav1.ListOptions{LabelSelector: sandboxSelector, Limit: listPage}
	for {
		page, err := c.pods.CoreV1().Pods(c.cfg.Namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing Pods: %w", err)
		}
		for i := range page.Items {
			out[page.Items[i].Name] = slimPod(&page.Items[i])
		}
		if opts.Continue = page.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

// slimPod is what podDeath reads of p, no more: a pass keeps that of
// each sandbox Pod, not the whole object with the termination messages
// and log tails a sandbox can fill (about 4 KiB a container), and so
// does OnDeath's informer (which keys its cache by namespace and name,
// and resumes its watch from the resource version).
func slimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID,
			ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase, Reason: p.Status.Reason},
	}
	for _, st := range p.Status.ContainerStatuses {
		if t := st.State.Terminated; t != nil {
			out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, corev1.ContainerStatus{Name: st.Name, State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Signal: t.Signal, Reason: t.Reason},
			}})
		}
	}
	return out
}
