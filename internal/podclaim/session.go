package podclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/strictjson"
)

// record finds the Pod of a claim just Ready, checks it is the one the
// claim reports, and writes it on the claim with the session's network
// policy n, sealed (one merge patch, conditional on the claim's UID), so
// that every replica later knows which Pod is the session's and which
// egress it has. The record is written here, not at the claim's
// creation, because its seal binds the claim's UID, which the API
// server gives at creation; no replica attaches a claim whose Pod is
// not recorded, so none reads a claim without it.
//
// The patch carries no resource version, on purpose: agent-sandbox's
// controller updates every claim once more just after it is Ready, so a
// resource version precondition failed in every claim on the bed and
// cost a read and a second patch. It would add nothing: what ties the
// recorded Pod to this claim is not the claim's status as read but
// ownership, which claimPod checked (the Sandbox's controller is this
// claim's UID, the Pod's is that Sandbox's UID, and agent-sandbox never
// moves a claim to another Sandbox), and the claim's UID in the patch
// keeps it off any other claim of the same name: uid is immutable, so
// the API server refuses the change (a 422 Invalid, see uidChanged). A Pod that dies or is
// replaced after the record is Find's to report, as at any later time.
// The patched claim must still name the Sandbox checked, or it is an
// error.
func (c *Claimer) record(ctx context.Context, claim *extv1.SandboxClaim, id string, n spec.NetworkPolicy) (*Session, error) {
	pod, err := c.claimPod(ctx, claim)
	if err != nil {
		return nil, err
	}
	if ip := claim.Status.SandboxStatus.PodIPs[0]; pod.Status.PodIP != ip {
		return nil, fmt.Errorf("claim %s reports Pod IP %s, but its Pod %s has %q", claim.Name, ip, pod.Name, pod.Status.PodIP)
	}
	return c.writePod(ctx, claim, pod, id, n)
}

// writePod writes pod and session id's network policy n (sealed for id)
// on claim, unless the claim of that name is another than claim (its uid
// differs), and is the session the patched claim holds.
func (c *Claimer) writePod(ctx context.Context, claim *extv1.SandboxClaim, pod *corev1.Pod, id string, n spec.NetworkPolicy) (*Session, error) {
	now := time.Now().UTC()
	stamp := now.Format(time.RFC3339Nano)
	network, err := sealNetwork(c.cfg.RouterKey, claim.UID, id, n)
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", claim.Name, err)
	}
	notes := map[string]string{PodAnnotation: pod.Name + "/" + string(pod.UID), ReadyAnnotation: stamp, ActiveAnnotation: stamp, NetworkAnnotation: network}
	if h := c.holder(claim.UID); h != "" {
		notes[HolderAnnotation] = h
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": claim.UID, "annotations": notes}})
	if err != nil {
		return nil, fmt.Errorf("encoding claim %s's Pod: %w", claim.Name, err)
	}
	var patched extv1.SandboxClaim
	if err := c.ext.Patch(types.MergePatchType).Namespace(c.cfg.Namespace).Resource(claimsResource).Name(claim.Name).
		Body(patch).Do(ctx).Into(&patched); err != nil {
		if uidChanged(err) {
			return nil, fmt.Errorf("recording Pod %s on claim %s: the claim was replaced by another of the same name: %w", pod.Name, claim.Name, err)
		}
		return nil, fmt.Errorf("recording Pod %s on claim %s: %w", pod.Name, claim.Name, err)
	}
	if box := patched.Status.SandboxStatus.Name; box != claim.Status.SandboxStatus.Name {
		return nil, fmt.Errorf("claim %s moved from Sandbox %s to %q while its Pod was recorded: claim again", claim.Name, claim.Status.SandboxStatus.Name, box)
	}
	c.noteWritten(claim.Name, now)
	s, err := sessionOf(&patched)
	if err != nil {
		return nil, err
	}
	if s.Network, err = c.network(s); err != nil {
		return nil, err
	}
	return s, s.setPod(pod)
}

// claimPod is the Pod of the claim's Sandbox: named by the Sandbox's
// pod-name annotation, or as the Sandbox; the Sandbox must be controlled
// by the claim (agent-sandbox sets that on adoption) and the Pod by the
// Sandbox, and the Pod must carry the sandbox label and not be being
// deleted: Find requires the label too, so a template whose Pods lack it
// is refused here, not claimed and then read as dead. The Pod is read named
// as the Sandbox at the same time as the Sandbox (one round trip, not
// two), and read again by the annotation's name only in the rare
// adoption that names it otherwise.
func (c *Claimer) claimPod(ctx context.Context, claim *extv1.SandboxClaim) (*corev1.Pod, error) {
	name := claim.Status.SandboxStatus.Name
	pods := c.pods.CoreV1().Pods(c.cfg.Namespace)
	type podRead struct {
		pod *corev1.Pod
		err error
	}
	guess := make(chan podRead, 1)
	go func() {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		guess <- podRead{p, err}
	}()
	var box sandboxv1.Sandbox
	boxErr := c.boxes.Get().Namespace(c.cfg.Namespace).Resource("sandboxes").Name(name).Do(ctx).Into(&box)
	read := <-guess
	if boxErr != nil {
		return nil, fmt.Errorf("reading claim %s's Sandbox %q: %w", claim.Name, name, boxErr)
	}
	if owner := metav1.GetControllerOf(&box); owner == nil || owner.UID != claim.UID {
		return nil, misconfigured(claim, fmt.Errorf("the Sandbox %s is not controlled by claim %s", box.Name, claim.Name))
	}
	podName := box.Name
	if n := box.Annotations[sandboxv1.SandboxPodNameAnnotation]; n != "" && n != box.Name {
		podName = n
		read.pod, read.err = pods.Get(ctx, podName, metav1.GetOptions{})
	}
	if read.err != nil {
		return nil, fmt.Errorf("reading claim %s's Pod %s: %w", claim.Name, podName, read.err)
	}
	pod := read.pod
	if owner := metav1.GetControllerOf(pod); owner == nil || owner.UID != box.UID {
		return nil, misconfigured(claim, fmt.Errorf("the Pod %s is not controlled by claim %s's Sandbox %s", podName, claim.Name, box.Name))
	}
	if pod.Labels[sandboxLabel] != sandboxComponent {
		return nil, misconfigured(claim, fmt.Errorf("template %q's Pod %s has no label %s, which Warden finds its sandbox Pods by: add it to the SandboxTemplate's Pod labels, as deploy/'s template does", claim.Labels[TemplateLabel], podName, sandboxSelector))
	}
	if pod.DeletionTimestamp != nil {
		return nil, fmt.Errorf("claim %s's Pod %s is being deleted", claim.Name, podName)
	}
	return pod, nil
}

// MisconfiguredError is a claim refused for how the cluster is set up
// (its template's Pods, its Sandbox's owner): Error names the Pod, the
// labels and the fix, for the operator's log; Public is the one line for
// the tenant, who may not read the cluster's names.
type MisconfiguredError struct {
	// Template is the claim's template, which the tenant named.
	Template string
	// Err says what is wrong and how to fix it.
	Err error
}

func (e *MisconfiguredError) Error() string { return e.Err.Error() }
func (e *MisconfiguredError) Unwrap() error { return e.Err }

// Public says which template is misconfigured, without the cluster's detail.
func (e *MisconfiguredError) Public() string {
	return fmt.Sprintf("template %q is misconfigured on this server; tell the operator", e.Template)
}

// misconfigured is err, about claim's cluster setup, as a MisconfiguredError.
func misconfigured(claim *extv1.SandboxClaim, err error) error {
	return &MisconfiguredError{Template: claim.Labels[TemplateLabel], Err: err}
}

// setPod takes the Pod's address, which must be one IP.
func (s *Session) setPod(pod *corev1.Pod) error {
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil {
		return fmt.Errorf("session %q's Pod %s has no usable IP %q: %w", s.ID, pod.Name, pod.Status.PodIP, err)
	}
	s.PodIP = ip
	return nil
}

// sessionOf reads a session from its claim's labels, annotations and
// spec, refusing what Warden would not have written.
func sessionOf(claim *extv1.SandboxClaim) (*Session, error) {
	s := &Session{
		ID: claim.Annotations[SessionAnnotation], Owner: claim.Labels[OwnerLabel], Template: claim.Labels[TemplateLabel],
		Claim: claim.Name, Sandbox: claim.Status.SandboxStatus.Name, Created: claim.CreationTimestamp.Time,
		Releasing: claim.DeletionTimestamp != nil, Holder: claim.Annotations[HolderAnnotation], claimUID: claim.UID,
	}
	if s.ID == "" || ClaimName(s.ID) != claim.Name || claim.Labels[SessionLabel] != claim.Name {
		return nil, fmt.Errorf("claim %s: annotation %s and label %s do not name it: not a claim Warden made", claim.Name, SessionAnnotation, SessionLabel)
	}
	if err := checkID(s.ID); err != nil {
		return nil, fmt.Errorf("claim %s: annotation %s: %w: not a claim Warden made", claim.Name, SessionAnnotation, err)
	}
	if lc := claim.Spec.Lifecycle; lc != nil && lc.ShutdownTime != nil {
		s.Expires = lc.ShutdownTime.Time
	}
	a := claim.Annotations
	var err error
	if s.IdleTimeout, err = time.ParseDuration(a[IdleAnnotation]); err != nil || s.IdleTimeout <= 0 {
		return nil, fmt.Errorf("claim %s: annotation %s %q is not a positive duration", claim.Name, IdleAnnotation, a[IdleAnnotation])
	}
	if s.LastActive, err = time.Parse(time.RFC3339Nano, a[ActiveAnnotation]); err != nil {
		return nil, fmt.Errorf("claim %s: annotation %s: %w", claim.Name, ActiveAnnotation, err)
	}
	if err := strictjson.Decode([]byte(a[LimitsAnnotation]), &s.Limits); err != nil {
		return nil, fmt.Errorf("claim %s: annotation %s: %w", claim.Name, LimitsAnnotation, err)
	}
	if err := s.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("claim %s: annotation %s: %w", claim.Name, LimitsAnnotation, err)
	}
	s.networkRecord = a[NetworkAnnotation]
	return s, s.readPod(claim)
}

// readPod reads the Pod annotation and Ready time, present once the
// claiming replica recorded them (absent: the claim is still waiting,
// or its replica died first and the idle reap will release it).
func (s *Session) readPod(claim *extv1.SandboxClaim) error {
	v, ok := claim.Annotations[PodAnnotation]
	if !ok {
		if ip := claim.Status.SandboxStatus.PodIPs; len(ip) > 0 {
			s.PodIP, _ = netip.ParseAddr(ip[0]) // the zero Addr, if it does not parse, says as much.
		}
		return nil
	}
	name, uid, found := strings.Cut(v, "/")
	if !found || name == "" || uid == "" {
		return fmt.Errorf("claim %s: annotation %s %q is not name/uid", claim.Name, PodAnnotation, v)
	}
	s.Pod, s.PodUID = name, types.UID(uid)
	ready, err := time.Parse(time.RFC3339Nano, claim.Annotations[ReadyAnnotation])
	if err != nil {
		return fmt.Errorf("claim %s: annotation %s: %w", claim.Name, ReadyAnnotation, err)
	}
	s.Ready = ready
	if ip := claim.Status.SandboxStatus.PodIPs; len(ip) > 0 {
		s.PodIP, _ = netip.ParseAddr(ip[0]) // Find replaces it with the Pod's own.
	}
	return nil
}

// Find is owner's session id: its claim and live Pod, read from the API
// server (one GET of each), so any replica finds any session. A session
// of another owner is ErrNotFound, as one never made: a tenant learns
// nothing of another's. A session whose Pod is gone, replaced or ended is
// ErrDead with the reason in one line; one whose claiming replica has not
// yet recorded its Pod is ErrPending, or ErrDead once that is older than
// Config.ReadyTimeout (the replica died before recording it).
func (c *Claimer) Find(ctx context.Context, owner, id string) (*Session, error) {
	s, err := c.Read(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if err := c.Unrecorded(s); err != nil {
		return nil, err
	}
	if s.Network, err = c.network(s); err != nil {
		return nil, err
	}
	pod, err := c.pods.CoreV1().Pods(c.cfg.Namespace).Get(ctx, s.Pod, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading session %q's Pod %s: %w", id, s.Pod, err)
	}
	if err != nil {
		pod = nil
	}
	if why := podDeath(s, pod); why != "" {
		return nil, fmt.Errorf("session %q: %w: %s", id, ErrDead, why)
	}
	if why := foreignPod(s, pod); why != "" {
		return nil, fmt.Errorf("session %q: %w: %s", id, ErrDead, why)
	}
	return s, s.setPod(pod)
}

// Read is owner's session id as its claim records it (one GET), its Pod
// not read: enough to learn the session's holder (Session.Holder) before
// forwarding a request there, where Find would cost a second call. Its
// errors are Find's: ErrNotFound for none or another owner's, ErrDead
// for a claim being released.
func (c *Claimer) Read(ctx context.Context, owner, id string) (*Session, error) {
	var claim extv1.SandboxClaim
	name := ClaimName(id)
	err := c.ext.Get().Namespace(c.cfg.Namespace).Resource(claimsResource).Name(name).Do(ctx).Into(&claim)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading session %q's claim %s: %w", id, name, err)
	}
	if err != nil || claim.Annotations[SessionAnnotation] != id || claim.Labels[OwnerLabel] != owner {
		return nil, fmt.Errorf("session %q: %w (released, reaped, expired, or never made)", id, ErrNotFound)
	}
	s, err := sessionOf(&claim)
	if err != nil {
		return nil, err
	}
	if claim.DeletionTimestamp != nil {
		return nil, fmt.Errorf("session %q: %w: its claim %s is being released", id, ErrDead, name)
	}
	return s, nil
}

// Hold records this replica as session s's holder (Config.Holder's
// value, or none) on its claim, one merge patch conditional on the
// claim's UID: a replica that attached a session another claimed says
// so, and the others forward to it from then on. A claim gone or
// replaced is ErrNotFound. Only a replica with no address to record, on
// a claim that recorded none when Find read it, does not write: that
// skips the PATCH of every attach where replicas have no addresses. A
// replica with an address writes even when Find read its own: another
// replica may have recorded itself between that read and this attach
// (its Pod connection ended within the dial), and skipping would leave
// the claim naming it while this one holds the Pod.
func (c *Claimer) Hold(ctx context.Context, s *Session) error {
	if s.claimUID == "" {
		return fmt.Errorf("recording session %q's holder: it has no claim UID: hold what Find or Claim returned", s.ID)
	}
	v := c.holder(s.claimUID)
	if v == "" && s.Holder == "" {
		return nil
	}
	var h any
	if v != "" {
		h = v
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": s.claimUID, "annotations": map[string]any{HolderAnnotation: h},
	}})
	if err != nil {
		return fmt.Errorf("encoding session %q's holder: %w", s.ID, err)
	}
	err = c.ext.Patch(types.MergePatchType).Namespace(c.cfg.Namespace).Resource(claimsResource).Name(s.Claim).Body(patch).Do(ctx).Error()
	if apierrors.IsNotFound(err) || (err != nil && uidChanged(err)) {
		return fmt.Errorf("recording session %q's holder: %w", s.ID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("recording session %q's holder on claim %s: %w", s.ID, s.Claim, err)
	}
	s.Holder, _ = h.(string) // nil (none) is ""
	return nil
}

// foreignPod says in one line why pod, which claim annotations name for
// session s, is not its Sandbox's sandbox Pod, or "" when it is: the
// annotation is writable by whoever may patch claims, and must not
// point a replica at another session's Pod. The Sandbox's name is the
// claim's status, which only the controller writes.
func foreignPod(s *Session, pod *corev1.Pod) string {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "Sandbox" || owner.Name != s.Sandbox || s.Sandbox == "" {
		return fmt.Sprintf("its recorded Pod %s is not controlled by the claim's Sandbox %q", s.Pod, s.Sandbox)
	}
	if pod.Labels[sandboxLabel] != sandboxComponent {
		return fmt.Sprintf("its recorded Pod %s has no label %s", s.Pod, sandboxSelector)
	}
	return ""
}

// Unrecorded is Find's error for session s (as Find or List read it)
// with no Pod recorded yet: ErrPending, or ErrDead once that is older
// than Config.ReadyTimeout; nil when its Pod is recorded. A listing
// tells a session's state by it without reading its Pod.
func (c *Claimer) Unrecorded(s *Session) error {
	if s.PodUID != "" {
		return nil
	}
	if time.Since(s.Created) > c.cfg.ReadyTimeout {
		return fmt.Errorf("session %q: %w: its claiming replica never recorded a Pod on claim %s", s.ID, ErrDead, s.Claim)
	}
	return fmt.Errorf("session %q: %w (claim %s has no Pod recorded yet): retry shortly", s.ID, ErrPending, s.Claim)
}

// podDeath says in one line why pod (nil: not found) no longer runs
// session s, or "" while it does. Only fields the kubelet writes are
// quoted, never a container's termination message, which the sandbox
// writes.
func podDeath(s *Session, pod *corev1.Pod) string {
	switch {
	case pod == nil:
		return fmt.Sprintf("its Pod %s was deleted", s.Pod)
	case pod.UID != s.PodUID:
		return fmt.Sprintf("its Pod %s was deleted and replaced by another; the session's files and processes went with it", s.Pod)
	case pod.DeletionTimestamp != nil:
		return fmt.Sprintf("its Pod %s is being deleted", s.Pod)
	case pod.Status.Phase == corev1.PodFailed:
		return fmt.Sprintf("its Pod %s failed: %s", s.Pod, termination(pod))
	case pod.Status.Phase == corev1.PodSucceeded:
		return fmt.Sprintf("its Pod %s ended: %s", s.Pod, termination(pod))
	}
	return ""
}

// termination describes how a finished Pod's first terminated container
// ended.
func termination(pod *corev1.Pod) string {
	for _, st := range pod.Status.ContainerStatuses {
		if t := st.State.Terminated; t != nil {
			if t.Signal != 0 {
				return fmt.Sprintf("container %s killed by signal %d (%q)", st.Name, t.Signal, t.Reason)
			}
			return fmt.Sprintf("container %s exited %d (%q)", st.Name, t.ExitCode, t.Reason)
		}
	}
	if pod.Status.Reason != "" {
		return fmt.Sprintf("%q", pod.Status.Reason)
	}
	return "no container reports how"
}

// List is owner's sessions, read with a label selector in pages. An
// empty owner is refused, not read as "all": a keyless server's owner is
// "", and it must not see every tenant's sessions (ListAll is for the
// reaper and operators). Claims it cannot read are logged and left out,
// so that one bad claim does not hide the rest. Pods are not read: Find
// tells a live session from a dead one.
func (c *Claimer) List(ctx context.Context, owner string) ([]*Session, error) {
	if owner == "" {
		return nil, errors.New("listing sessions: the owner is empty: give the tenant's, or use ListAll")
	}
	return c.sessions(ctx, owner)
}

// ListAll is every tenant's sessions, for the reaper and operators; a
// tenant's request must use List.
func (c *Claimer) ListAll(ctx context.Context) ([]*Session, error) {
	return c.sessions(ctx, "")
}

// sessions is List's and ListAll's: owner's sessions, or all for "".
func (c *Claimer) sessions(ctx context.Context, owner string) ([]*Session, error) {
	claims, err := c.listClaims(ctx, owner)
	if err != nil {
		return nil, err
	}
	var out []*Session
	for i := range claims {
		s, err := sessionOf(&claims[i])
		if err != nil {
			c.log.Warn("listing sessions: skipping a claim", "err", err)
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

const (
	// listPage is how many claims one LIST returns at most.
	listPage = 500
	// maxOwnerListed bounds one owner's listing, which a tenant's request
	// makes: claims others plant under a tenant's owner label are not
	// bounded by MaxPerOwner, so a listing past it fails closed rather
	// than growing without bound.
	maxOwnerListed = 2 * listPage
)

// listClaims lists Warden's claims, one owner's if owner is not "".
func (c *Claimer) listClaims(ctx context.Context, owner string) ([]extv1.SandboxClaim, error) {
	selector := ManagedLabel + "=" + managedValue
	if errs := validation.IsValidLabelValue(owner); len(errs) != 0 {
		return nil, fmt.Errorf("listing sessions: owner %q is not a label value: %s", owner, errs[0])
	}
	if owner != "" {
		selector += "," + OwnerLabel + "=" + owner
	}
	var all []extv1.SandboxClaim
	opts := metav1.ListOptions{LabelSelector: selector, Limit: listPage}
	for {
		var page extv1.SandboxClaimList
		err := c.ext.Get().Namespace(c.cfg.Namespace).Resource(claimsResource).
			VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(&page)
		if err != nil {
			return nil, fmt.Errorf("listing claims (%s): %w", selector, err)
		}
		all = append(all, page.Items...)
		if owner != "" && len(all) > maxOwnerListed {
			return nil, fmt.Errorf("listing claims (%s): over %d claims, more than Warden makes for one owner: delete the claims it did not make", selector, maxOwnerListed)
		}
		if opts.Continue = page.Continue; opts.Continue == "" {
			return all, nil
		}
	}
}
