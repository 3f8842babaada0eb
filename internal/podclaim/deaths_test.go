package podclaim

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// deathWait bounds a wait for a death the test caused; the wait ends
// as soon as it is heard.
const deathWait = time.Minute

// TestOnDeath has a fake API server's Pods change under sessions that
// watch them: each change that ends a session's Pod is heard once with
// the reason Find gives, never the container's own message; a watch
// stopped before the change is not called (the other watch of the same
// Pod hearing it shows the informer handled the change).
func TestOnDeath(t *testing.T) {
	tests := []struct {
		name    string
		change  func(ctx context.Context, t *testing.T, pods *fake.Clientset, pod *corev1.Pod)
		wantWhy string
	}{
		{"deleted", func(ctx context.Context, t *testing.T, cs *fake.Clientset, pod *corev1.Pod) {
			if err := cs.CoreV1().Pods("ns").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "its Pod box-1 was deleted"},
		{"failed", func(ctx context.Context, t *testing.T, cs *fake.Clientset, pod *corev1.Pod) {
			pod.Status.Phase = corev1.PodFailed
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "sandbox", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "the sandbox wrote this"},
			}}}
			if _, err := cs.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, `its Pod box-1 failed: container sandbox exited 3 ("Error")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), deathWait)
			defer cancel()
			pod := runningPod("box-1", "uid-1")
			cs := fake.NewClientset(pod.DeepCopy(), runningPod("box-9", "uid-9"))
			c := &Claimer{cfg: Config{Namespace: "ns"}, pods: cs}
			if err := c.WatchPods(ctx); err != nil {
				t.Fatal(err)
			}
			heard := make(chan error, 2)
			s := &Session{ID: "s-1", Pod: "box-1", PodUID: "uid-1"}
			if _, err := c.OnDeath(ctx, s, func(err error) { heard <- err }); err != nil {
				t.Fatal(err)
			}
			stopped := make(chan error, 1)
			stop, err := c.OnDeath(ctx, &Session{ID: "s-stopped", Pod: "box-1", PodUID: "uid-1"}, func(err error) { stopped <- err })
			if err != nil {
				t.Fatal(err)
			}
			stop()
			later := make(chan error, 1)
			if _, err := c.OnDeath(ctx, &Session{ID: "s-later", Pod: "box-9", PodUID: "uid-9"}, func(err error) { later <- err }); err != nil {
				t.Fatal(err)
			}
			tt.change(ctx, t, cs, pod.DeepCopy())
			select {
			case err := <-heard:
				if !errors.Is(err, ErrDead) || !strings.Contains(err.Error(), tt.wantWhy) {
					t.Errorf("got %v, want ErrDead saying %q", err, tt.wantWhy)
				}
				if strings.Contains(err.Error(), "the sandbox wrote this") {
					t.Errorf("got %v, which quotes the container's own message", err)
				}
			case <-ctx.Done():
				t.Fatalf("the Pod's death was not heard within %v", deathWait)
			}
			// An event the informer delivers after the first, heard by a
			// third watch, so that a stopped watch wrongly fired by the
			// first had its turn.
			if err := cs.CoreV1().Pods("ns").Delete(ctx, "box-9", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-later:
				if !errors.Is(err, ErrDead) {
					t.Errorf("the second Pod's watch: got %v, want ErrDead", err)
				}
			case <-ctx.Done():
				t.Fatalf("the second Pod's death was not heard within %v", deathWait)
			}
			select {
			case err := <-stopped:
				t.Errorf("a stopped watch heard %v", err)
			default:
			}
			if n := watched(c); n != 0 {
				t.Errorf("%d watches left registered after they fired or stopped, want 0", n)
			}
		})
	}
}

// TestOnDeathAlreadyDead checks that a session whose Pod is already gone,
// or was replaced by another under its name, hears of it at once, and
// that OnDeath refuses without WatchPods (never started, or its context
// ended) or without a recorded Pod.
func TestOnDeathAlreadyDead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deathWait)
	defer cancel()
	c := &Claimer{cfg: Config{Namespace: "ns"}, pods: fake.NewClientset(runningPod("box-2", "uid-new"))}
	if _, err := c.OnDeath(ctx, &Session{ID: "s-1", Pod: "box-2", PodUID: "uid-old"}, func(error) {}); err == nil || !strings.Contains(err.Error(), "WatchPods is not running") {
		t.Errorf("OnDeath before WatchPods: got %v, want an error saying WatchPods is not running", err)
	}
	if err := c.WatchPods(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WatchPods(ctx); err == nil {
		t.Error("a second WatchPods: got nil, want an error")
	}
	ended, end := context.WithCancel(ctx)
	e := &Claimer{cfg: Config{Namespace: "ns"}, pods: fake.NewClientset()}
	if err := e.WatchPods(ended); err != nil {
		t.Fatal(err)
	}
	end()
	if _, err := e.OnDeath(ctx, &Session{ID: "s-1", Pod: "box-1", PodUID: "uid-1"}, func(error) {}); err == nil || !strings.Contains(err.Error(), "WatchPods is not running") {
		t.Errorf("OnDeath after WatchPods' context ended: got %v, want an error saying WatchPods is not running", err)
	}
	if _, err := c.OnDeath(ctx, &Session{ID: "s-1"}, func(error) {}); err == nil || !strings.Contains(err.Error(), "none recorded") {
		t.Errorf("OnDeath of a session without a Pod: got %v, want an error saying it has none recorded", err)
	}
	for _, tt := range []struct {
		pod     string
		uid     ktypes.UID
		wantWhy string
	}{
		{"box-1", "uid-1", "its Pod box-1 was deleted"},
		{"box-2", "uid-old", "replaced by another"},
	} {
		heard := make(chan error, 1)
		if _, err := c.OnDeath(ctx, &Session{ID: "s-1", Pod: tt.pod, PodUID: tt.uid}, func(err error) { heard <- err }); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-heard:
			if !errors.Is(err, ErrDead) || !strings.Contains(err.Error(), tt.wantWhy) {
				t.Errorf("Pod %s: got %v, want ErrDead saying %q", tt.pod, err, tt.wantWhy)
			}
		case <-ctx.Done():
			t.Fatalf("Pod %s: its death was not heard within %v", tt.pod, deathWait)
		}
	}
}

// runningPod is a running Pod name with uid in namespace ns.
func runningPod(name string, uid ktypes.UID) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"},
	}
}

// watched is the number of watches c's deaths holds.
func watched(c *Claimer) int {
	c.mu.Lock()
	d := c.deaths
	c.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, m := range d.byPod {
		n += len(m)
	}
	return n
}

// TestOnDeathUnwatched: when WatchPods' context ends, a registered watch
// is told (ErrUnwatched, not ErrDead: the session may live) and dropped,
// rather than left waiting for a death it would not hear.
func TestOnDeathUnwatched(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), deathWait)
	defer cancel()
	c := &Claimer{cfg: Config{Namespace: "ns"}, pods: fake.NewClientset(runningPod("box-1", "uid-1"))}
	watching, end := context.WithCancel(ctx)
	if err := c.WatchPods(watching); err != nil {
		t.Fatal(err)
	}
	heard := make(chan error, 1)
	if _, err := c.OnDeath(ctx, &Session{ID: "s-1", Pod: "box-1", PodUID: "uid-1"}, func(err error) { heard <- err }); err != nil {
		t.Fatal(err)
	}
	end()
	select {
	case err := <-heard:
		if !errors.Is(err, ErrUnwatched) || errors.Is(err, ErrDead) || !strings.Contains(err.Error(), "call Find") {
			t.Errorf("got %v, want ErrUnwatched saying to call Find", err)
		}
	case <-ctx.Done():
		t.Fatalf("the watch's end was not told within %v", deathWait)
	}
	if n := watched(c); n != 0 {
		t.Errorf("%d watches left registered after the watch ended, want 0", n)
	}
}

// TestDeathWatchStop: a callback whose goroutine runs after stop
// returned calls nothing, and a watch stopped is fired no more.
func TestDeathWatchStop(t *testing.T) {
	called := 0
	w := &deathWatch{d: &deaths{byPod: map[string]map[*deathWatch]struct{}{}}, s: &Session{ID: "s-1", Pod: "box-1"}, fn: func(error) { called++ }}
	w.stop()
	w.call(ErrDead)
	w.fire(ErrDead)
	w.call(ErrDead)
	if called != 0 {
		t.Errorf("the callback ran %d times after stop, want 0", called)
	}
}

// warnings is a slog handler that sends each record's message, for a
// test to wait on.
type warnings chan string

func (w warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w warnings) Handle(_ context.Context, r slog.Record) error {
	select {
	case w <- r.Message:
	default: // the test reads the first few; more would be counted by cap
	}
	return nil
}
func (w warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnings) WithGroup(string) slog.Handler      { return w }

// TestWatchPodsUnsyncedWarns: a Pod watch whose first list never
// finishes (the router may not list Pods) is warned of once, through
// the Claimer's logger, naming what to check, and WatchPods keeps
// waiting until its context ends.
func TestWatchPodsUnsyncedWarns(t *testing.T) {
	pods := fake.NewClientset()
	pods.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("the Role grants no list"))
	})
	logged := make(warnings, 8)
	c := &Claimer{cfg: Config{Namespace: "ns"}, pods: pods, log: slog.New(logged), syncWarn: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() { returned <- c.WatchPods(ctx) }()
	select {
	case msg := <-logged:
		if !strings.Contains(msg, "first list has not finished") || !strings.Contains(msg, "list and watch pods") {
			t.Errorf("the warning: got %q, want it to say the first list has not finished and to check the pods rights", msg)
		}
	case err := <-returned:
		t.Fatalf("WatchPods returned %v before its context ended, want it waiting", err)
	case <-time.After(deathWait):
		t.Fatalf("no warning within %v of a first list that cannot finish", deathWait)
	}
	cancel()
	if err := <-returned; err == nil {
		t.Errorf("WatchPods: got nil, want the unfinished first list's error")
	}
	if n := len(logged); n != 0 {
		t.Errorf("got %d more warnings, want the one only", n)
	}
}
