package podclaim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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

	mu     sync.Mutex
	byPod  map[string]map[*deathWatch]struct{}
	closed bool // the watch ended: every watch was told, none is added
}

// deathWatch is one OnDeath call: its session and callback, called at
// most once, never once stop has returned.
type deathWatch struct {
	d  *deaths
	s  *Session
	fn func(error)

	mu      sync.Mutex
	fired   bool // fire started the callback's goroutine
	stopped bool // stop was called: the goroutine calls nothing
}

// fire calls the callback with err, once, in a goroutine of its own, so
// that a slow callback never holds up the informer, unless the watch
// fired or was stopped already; a watch that fired is dropped, having
// nothing more to do.
func (w *deathWatch) fire(err error) {
	w.mu.Lock()
	over := w.fired || w.stopped
	w.fired = true
	w.mu.Unlock()
	if over {
		return
	}
	w.d.remove(w)
	go w.call(err)
}

// call is fire's goroutine: it calls the callback unless stop came
// first.
func (w *deathWatch) call(err error) {
	w.mu.Lock()
	stopped := w.stopped
	w.mu.Unlock()
	if !stopped {
		w.fn(err)
	}
}

// died fires w for its Pod's death, why.
func (w *deathWatch) died(why string) {
	w.fire(fmt.Errorf("session %q: %w: %s", w.s.ID, ErrDead, why))
}

// stop ends w: once it returns, no callback starts. One that started
// already may still be running (it may be what calls stop, so stop does
// not wait for it).
func (w *deathWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.d.remove(w)
}

// WatchPods starts the watch OnDeath needs, until ctx ends, and returns
// once it has listed the sandbox namespace's Pods (or ctx ended first).
// It watches every Pod of the namespace rather than those of a label,
// so that a template that labels its Pods otherwise cannot hide a death;
// the namespace holds only sandboxes (deploy/). Its cache keeps of each
// Pod only what a death is told by. A second call while the first one's
// watch runs is an error; once its context ended, every watch OnDeath
// registered is called with ErrUnwatched, and OnDeath refuses until
// WatchPods is called again.
func (c *Claimer) WatchPods(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(c.pods, 0, informers.WithNamespace(c.cfg.Namespace),
		informers.WithTransform(slimCached))
	inf := f.Core().V1().Pods().Informer()
	d := &deaths{store: inf.GetStore(), done: ctx.Done(), byPod: map[string]map[*deathWatch]struct{}{}}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    d.changed,
		UpdateFunc: func(_, o any) { d.changed(o) },
		DeleteFunc: d.deleted,
	}); err != nil {
		return fmt.Errorf("watching sandbox Pods: %w", err)
	}
	c.mu.Lock()
	if c.deaths != nil && !c.deaths.ended() {
		c.mu.Unlock()
		return errors.New("watching sandbox Pods: already watching: call WatchPods once per Claimer")
	}
	c.deaths = d
	c.mu.Unlock()
	go func() {
		<-ctx.Done()
		d.end()
	}()
	f.Start(ctx.Done())
	synced := make(chan struct{})
	defer close(synced)
	go c.warnUnsynced(ctx, synced)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("watching sandbox Pods in %s: the first list did not finish: %w", c.cfg.Namespace, ctx.Err())
	}
	return nil
}

// syncWarnAfter is how long WatchPods' first list may take before it is
// warned of: the namespace's Pods are listed in well under a second by
// a reachable API server that lets the router list them.
const syncWarnAfter = 30 * time.Second

// warnUnsynced warns once, through the Claimer's logger, when the Pod
// watch's first list has not finished (synced is not closed) within
// syncWarnAfter (c.syncWarn in tests) while ctx lives. A replica whose
// service account may not list or watch Pods, or that cannot reach the
// API server, would otherwise hear of no death and say nothing: client-
// go retries, logging only to klog's stderr. WatchPods keeps waiting.
func (c *Claimer) warnUnsynced(ctx context.Context, synced <-chan struct{}) {
	after := c.syncWarn
	if after <= 0 {
		after = syncWarnAfter
	}
	t := time.NewTimer(after)
	defer t.Stop()
	select {
	case <-synced:
		return
	case <-ctx.Done():
		return
	case <-t.C:
	}
	log := c.log
	if log == nil {
		log = slog.Default()
	}
	log.Warn("watching sandbox Pods: the first list has not finished: a session's death is learned only when its stream ends until it does; check that the router's service account may list and watch pods in the namespace, and that the API server is reachable",
		"namespace", c.cfg.Namespace, "waited", after)
}

// slimCached is the informer's transform: slimPod of a Pod, so that
// its cache of every Pod of the namespace keeps only what a death is
// told by.
func slimCached(o any) (any, error) {
	if pod, ok := o.(*corev1.Pod); ok {
		return slimPod(pod), nil
	}
	return o, nil
}

// OnDeath calls fn once, in a goroutine of its own, with an error
// wrapping ErrDead that says why in one line (as Find would), when
// session s's Pod (as Find or Claim returned it) is deleted, replaced,
// being deleted, failed or ended; at once if it already is. It is how a
// backend learns that a session died without polling Find. If the
// watch ends first (WatchPods' context did), fn is called with
// ErrUnwatched instead: the session may live, and Find tells. While
// the watch cannot re-watch (the API server unreachable, its RBAC
// revoked) client-go retries it and deaths go unheard until it can; a
// backend that must know meanwhile asks Find. stop cancels the call:
// fn is not called after stop returns, but a call already started may
// still be running (stop does not wait, so fn may call stop); a backend
// calls it when the session ends. It needs WatchPods running on c. A
// Pod the watch has not seen yet (it lags the API server a little) is
// read once, within ctx, rather than taken for deleted.
func (c *Claimer) OnDeath(ctx context.Context, s *Session, fn func(error)) (stop func(), err error) {
	c.mu.Lock()
	d := c.deaths
	c.mu.Unlock()
	notRunning := fmt.Errorf("watching session %q's Pod: WatchPods is not running: start it first", s.ID)
	if d == nil || d.ended() {
		return nil, notRunning
	}
	if s.Pod == "" || s.PodUID == "" {
		return nil, fmt.Errorf("watching session %q's Pod: it has none recorded: watch what Find or Claim returned", s.ID)
	}
	w := &deathWatch{d: d, s: s, fn: fn}
	if !d.add(w) {
		return nil, notRunning
	}
	pod, err := c.currentPod(ctx, d, s)
	if err != nil {
		w.stop()
		return nil, err
	}
	if why := podDeath(s, pod); why != "" {
		w.died(why)
	}
	return w.stop, nil
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

// add registers w under its Pod's name, unless the watch ended.
func (d *deaths) add(w *deathWatch) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	m := d.byPod[w.s.Pod]
	if m == nil {
		m = map[*deathWatch]struct{}{}
		d.byPod[w.s.Pod] = m
	}
	m[w] = struct{}{}
	return true
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

// end tells every registered watch that the watch ended, and takes no
// more.
func (d *deaths) end() {
	d.mu.Lock()
	d.closed = true
	var all []*deathWatch
	for _, m := range d.byPod {
		for w := range m {
			all = append(all, w)
		}
	}
	d.mu.Unlock()
	for _, w := range all {
		w.fire(fmt.Errorf("session %q: %w", w.s.ID, ErrUnwatched))
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
			w.died(why)
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
			w.died(podDeath(w.s, nil))
		}
	}
}
