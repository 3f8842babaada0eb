package podclaim

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// deaths is a Claimer's watch of the sandbox namespace's Pods (one
// shared informer: one LIST and one watch per replica, however many
// sessions it serves) and the sessions waiting to hear of their Pod's
// death, by Pod name.
type deaths struct {
	store cache.Store
	done  <-chan struct{} // closed when WatchPods' context ends the watch

	mu    sync.Mutex
	byPod map[string]map[*deathWatch]struct{}
}

// deathWatch is one OnDeath call: its session and callback, called once.
type deathWatch struct {
	s    *Session
	fn   func(error)
	once sync.Once
}

// fire calls the callback, once, in a goroutine of its own, so that a
// slow callback never holds up the informer.
func (d *deathWatch) fire(why string) {
	d.once.Do(func() { go d.fn(fmt.Errorf("session %q: %w: %s", d.s.ID, ErrDead, why)) })
}

// WatchPods starts the watch OnDeath needs, until ctx ends, and returns
// once it has listed the sandbox namespace's Pods (or ctx ended first).
// It watches every Pod of the namespace rather than those of a label,
// so that a template that labels its Pods otherwise cannot hide a death;
// the namespace holds only sandboxes (deploy/). A second call while the
// first one's watch runs is an error; once its context ended, OnDeath
// refuses until WatchPods is called again.
func (c *Claimer) WatchPods(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(c.pods, 0, informers.WithNamespace(c.cfg.Namespace))
	inf := f.Core().V1().Pods().Informer()
	d := &deaths{store: inf.GetStore(), done: ctx.Done(), byPod: map[string]map[*deathWatch]struct{}{}}
	c.mu.Lock()
	if c.deaths != nil && !c.deaths.ended() {
		c.mu.Unlock()
		return errors.New("watching sandbox Pods: already watching: call WatchPods once per Claimer")
	}
	c.deaths = d
	c.mu.Unlock()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    d.changed,
		UpdateFunc: func(_, o any) { d.changed(o) },
		DeleteFunc: d.deleted,
	}); err != nil {
		return fmt.Errorf("watching sandbox Pods: %w", err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("watching sandbox Pods in %s: the first list did not finish: %w", c.cfg.Namespace, ctx.Err())
	}
	return nil
}

// OnDeath calls fn once, in a goroutine of its own, with an error
// wrapping ErrDead that says why in one line (as Find would), when
// session s's Pod (as Find or Claim returned it) is deleted, replaced,
// being deleted, failed or ended; at once if it already is. It is how a
// backend learns that a session died without polling Find. stop cancels
// the call (fn is not called after stop returns, unless it already
// was); a backend calls it when the session ends. It needs WatchPods
// running on c. A Pod the watch has not seen yet (it lags the API
// server a little) is read once, within ctx, rather than taken for
// deleted.
func (c *Claimer) OnDeath(ctx context.Context, s *Session, fn func(error)) (stop func(), err error) {
	c.mu.Lock()
	d := c.deaths
	c.mu.Unlock()
	if d == nil || d.ended() {
		return nil, fmt.Errorf("watching session %q's Pod: WatchPods is not running: start it first", s.ID)
	}
	if s.Pod == "" || s.PodUID == "" {
		return nil, fmt.Errorf("watching session %q's Pod: it has none recorded: watch what Find or Claim returned", s.ID)
	}
	w := &deathWatch{s: s, fn: fn}
	d.add(w)
	pod, err := c.currentPod(ctx, d, s)
	if err != nil {
		d.remove(w)
		return nil, err
	}
	if why := podDeath(s, pod); why != "" {
		w.fire(why)
	}
	return func() {
		d.remove(w)
		w.once.Do(func() {})
	}, nil
}

// currentPod is s's Pod as the watch last saw it or, if it has not
// seen it, as the API server has it (nil: not found).
func (c *Claimer) currentPod(ctx context.Context, d *deaths, s *Session) (*corev1.Pod, error) {
	o, exists, err := d.store.GetByKey(c.cfg.Namespace + "/" + s.Pod)
	if err != nil {
		return nil, fmt.Errorf("watching session %q's Pod %s: %w", s.ID, s.Pod, err)
	}
	if pod, ok := o.(*corev1.Pod); exists && ok {
		return pod, nil
	}
	pod, err := c.pods.CoreV1().Pods(c.cfg.Namespace).Get(ctx, s.Pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading session %q's Pod %s: %w", s.ID, s.Pod, err)
	}
	return pod, nil
}

// ended is whether the watch's context ended it.
func (d *deaths) ended() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// add registers w under its Pod's name.
func (d *deaths) add(w *deathWatch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.byPod[w.s.Pod]
	if m == nil {
		m = map[*deathWatch]struct{}{}
		d.byPod[w.s.Pod] = m
	}
	m[w] = struct{}{}
}

// remove drops w.
func (d *deaths) remove(w *deathWatch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.byPod[w.s.Pod], w)
	if len(d.byPod[w.s.Pod]) == 0 {
		delete(d.byPod, w.s.Pod)
	}
}

// watchers is a copy of the watches of Pod name.
func (d *deaths) watchers(name string) []*deathWatch {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*deathWatch, 0, len(d.byPod[name]))
	for w := range d.byPod[name] {
		out = append(out, w)
	}
	return out
}

// changed is an added or updated Pod: its watchers whose Pod it no
// longer runs (replaced, being deleted, ended) hear of it.
func (d *deaths) changed(o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	for _, w := range d.watchers(pod.Name) {
		if why := podDeath(w.s, pod); why != "" {
			w.fire(why)
		}
	}
}

// deleted is a deleted Pod, or the informer's tombstone of one deleted
// while its watch was down: its watchers of that UID hear of it.
func (d *deaths) deleted(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	for _, w := range d.watchers(pod.Name) {
		if w.s.PodUID == pod.UID {
			w.fire(podDeath(w.s, nil))
		}
	}
}
