package kubebed

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// NodeName is the simulated kubelet's Node.
const NodeName = "kubebed-node"

// readyWait bounds how long a Pod's process may take to accept
// connections on its port before the Pod is marked failed.
const readyWait = 30 * time.Second

// PodCommand says what local program stands in for a Pod's containers,
// given the Pod and the address it must serve on (the Pod's IP and its
// first container's first port; port 0 when the Pod declares none).
type PodCommand func(pod *corev1.Pod, addr netip.AddrPort) PodProcess

// PodProcess is a Pod's program: its path, arguments and extra
// environment, and how it gets its address.
type PodProcess struct {
	Path string
	Args []string
	Env  []string
	// ListenerStdin makes the kubelet listen on the Pod's address itself
	// and relay each connection to a listening unix stream socket it
	// hands the program as its standard input (inetd's way, never a
	// socket of the host's network): for a program in a network
	// namespace of its own (bedpod.Init's native Warden sandbox), where
	// it cannot bind the host's address. The Pod must declare a port,
	// and Ready must be set.
	ListenerStdin bool
	// Ready, when set, is what the program logs once it serves: the Pod
	// is Ready when its log says so. With ListenerStdin it is required
	// (startCommand refuses its lack), since the relay takes connections
	// before the program accepts any; without, a connection that
	// succeeds is Ready.
	Ready string
	// Err, when set, says why the Pod's program cannot be made; the
	// kubelet reports the Pod Failed with it and starts nothing.
	Err error
}

// Kubelet simulates a node's kubelet with local processes: it registers a
// Node, binds every unscheduled Pod to it (the bed runs no scheduler),
// starts each bound Pod's command on an address of its own, marks the Pod
// Running and Ready with that PodIP once the command accepts connections
// on the Pod's port, and on a Pod's deletion stops the command and
// finishes the deletion, as a kubelet does.
type Kubelet struct {
	client  kubernetes.Interface
	command PodCommand
	dir     string
	addrs   *addrPool

	informers informers.SharedInformerFactory

	mu   sync.Mutex
	pods map[types.UID]*podRun
	wg   sync.WaitGroup
}

// podRun is one Pod the kubelet has taken on: its command once started,
// and whether the Pod is gone (deleted while its command was starting).
type podRun struct {
	addr netip.Addr
	proc *process
	gone bool
}

// newKubelet makes a kubelet whose Pods' logs go under dir/pods.
func newKubelet(client kubernetes.Interface, command PodCommand, dir string) (*Kubelet, error) {
	addrs, err := newAddrPool()
	if err != nil {
		return nil, fmt.Errorf("picking the simulated node's addresses: %w", err)
	}
	dir = filepath.Join(dir, "pods")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the Pods' log directory: %w", err)
	}
	return &Kubelet{client: client, command: command, dir: dir, addrs: addrs, pods: map[types.UID]*podRun{}}, nil
}

// run registers the Node and serves Pods until ctx ends.
func (k *Kubelet) run(ctx context.Context) error {
	if err := k.registerNode(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(k.client, 0)
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { k.observe(ctx, o) },
		UpdateFunc: func(_, o any) { k.observe(ctx, o) },
		DeleteFunc: func(o any) { k.forget(o) },
	}); err != nil {
		return fmt.Errorf("watching Pods: %w", err)
	}
	k.informers = factory
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		return fmt.Errorf("listing Pods: %w", ctx.Err())
	}
	return nil
}

// shutdown, after run's context ended, waits for the kubelet's work in
// flight and stops every Pod's command.
func (k *Kubelet) shutdown() {
	if k.informers != nil {
		k.informers.Shutdown()
	}
	k.wg.Wait()
	k.stopAll()
}

// registerNode creates the Node and reports it Ready with room for
// every Pod its address pool can hold.
func (k *Kubelet) registerNode(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: map[string]string{"kubernetes.io/hostname": NodeName}}}
	created, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("registering Node %s: %w", NodeName, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("254"),
	}
	created.Status = corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
	}
	if _, err := k.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("reporting Node %s ready: %w", NodeName, err)
	}
	return nil
}

// observe acts on a Pod's new state: bind it, start it, or end it.
func (k *Kubelet) observe(ctx context.Context, o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok || ctx.Err() != nil {
		return
	}
	switch {
	case pod.DeletionTimestamp != nil && pod.Spec.NodeName == NodeName:
		k.goPod(func() { k.finishDeletion(ctx, pod) })
	case pod.DeletionTimestamp != nil:
	case pod.Spec.NodeName == "":
		k.goPod(func() { k.bind(ctx, pod) })
	case pod.Spec.NodeName == NodeName && k.take(pod.UID):
		k.goPod(func() { k.start(ctx, pod) })
	}
}

// goPod runs f in a goroutine run waits for before stopping the Pods.
func (k *Kubelet) goPod(f func()) {
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		f()
	}()
}

// take claims uid for a start, once.
func (k *Kubelet) take(uid types.UID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.pods[uid]; ok {
		return false
	}
	k.pods[uid] = &podRun{}
	return true
}

// bind schedules pod onto the Node. A conflict means it was bound
// already (an update seen twice).
func (k *Kubelet) bind(ctx context.Context, pod *corev1.Pod) {
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: NodeName},
	}
	err := k.client.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		log.Printf("kubebed kubelet: binding Pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// start runs pod's command on an address of its own and reports the Pod
// Running and Ready once the command accepts connections on its port.
func (k *Kubelet) start(ctx context.Context, pod *corev1.Pod) {
	addr, err := k.addrs.get()
	if err != nil {
		k.fail(ctx, pod, err)
		return
	}
	ap := netip.AddrPortFrom(addr, podPort(pod))
	c := k.command(pod, ap)
	proc, err := k.startCommand(pod, ap, c)
	if err != nil {
		k.addrs.put(addr)
		k.fail(ctx, pod, err)
		return
	}
	if !k.started(pod.UID, addr, proc) {
		return
	}
	if err := waitReady(ctx, proc, ap, c.Ready); err != nil {
		k.fail(ctx, pod, err)
		return
	}
	k.setStatus(ctx, pod, func(s *corev1.PodStatus) { runningStatus(s, pod, addr) })
	k.goPod(func() { k.watchExit(ctx, pod, proc) })
}

// startCommand starts c as pod's program on ap, first, if it takes its
// listener as stdin, starting the relay that carries ap's connections
// to it; the relay closes once the program ended.
func (k *Kubelet) startCommand(pod *corev1.Pod, ap netip.AddrPort, c PodProcess) (*process, error) {
	name := pod.Namespace + "_" + pod.Name
	if c.Err != nil {
		return nil, fmt.Errorf("making the Pod's program: %w", c.Err)
	}
	if !c.ListenerStdin {
		return startProcess(k.dir, name, c.Path, c.Args, c.Env)
	}
	if ap.Port() == 0 {
		return nil, errors.New("the Pod declares no container port to relay to its program (PodProcess.ListenerStdin)")
	}
	if c.Ready == "" {
		return nil, errors.New("PodProcess.ListenerStdin needs Ready, the line the program logs once it serves: the relay takes connections before the program does")
	}
	r, ln, err := newRelay(ap)
	if err != nil {
		return nil, err
	}
	// serving first: close (after the program) must not race serve's
	// start; connections queue in the unix listener until it accepts
	r.serve()
	proc, err := startProcessWith(k.dir, name, c.Path, c.Args, c.Env, ln, r.close)
	// the program holds its own copy; the kubelet's is only closed
	if cerr := ln.Close(); cerr != nil {
		log.Printf("kubebed kubelet: closing the kubelet's copy of %s's listener: %v", name, cerr)
	}
	if err != nil {
		r.close()
		return nil, err
	}
	return proc, nil
}

// watchExit waits for pod's command to end and, unless the kubelet
// stopped it (the Pod was deleted) or the bed is ending, reports the Pod
// Failed with its containers terminated, as a kubelet does when a
// Pod's only process dies under restartPolicy Never.
func (k *Kubelet) watchExit(ctx context.Context, pod *corev1.Pod, proc *process) {
	select {
	case <-ctx.Done():
		return
	case <-proc.done:
	}
	k.mu.Lock()
	run := k.pods[pod.UID]
	current := run != nil && run.proc == proc
	k.mu.Unlock()
	if !current {
		return
	}
	err := proc.exitError()
	log.Printf("kubebed kubelet: Pod %s/%s's command ended: %v", pod.Namespace, pod.Name, err)
	k.setStatus(ctx, pod, func(s *corev1.PodStatus) { terminatedStatus(s, proc.exitCode(), err.Error()) })
}

// terminatedStatus is what a kubelet reports for a Pod whose containers
// all exited.
func terminatedStatus(s *corev1.PodStatus, code int32, msg string) {
	now := metav1.Now()
	s.Phase, s.Reason, s.Message = corev1.PodFailed, "KubebedCommandExited", msg
	for i := range s.Conditions {
		if c := s.Conditions[i].Type; c == corev1.PodReady || c == corev1.ContainersReady {
			s.Conditions[i].Status, s.Conditions[i].LastTransitionTime = corev1.ConditionFalse, now
		}
	}
	for i := range s.ContainerStatuses {
		c := &s.ContainerStatuses[i]
		c.Ready, c.Started = false, new(false)
		c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: "Error", Message: msg, FinishedAt: now, ContainerID: c.ContainerID,
		}}
	}
}

// started records uid's running command, or, if the Pod went while it
// started, stops it and reports false.
func (k *Kubelet) started(uid types.UID, addr netip.Addr, proc *process) bool {
	k.mu.Lock()
	gone := k.pods[uid].gone
	if !gone {
		k.pods[uid] = &podRun{addr: addr, proc: proc}
	}
	k.mu.Unlock()
	if gone {
		k.release(&podRun{addr: addr, proc: proc})
	}
	return !gone
}

// podPort is pod's first container's first port, or 0.
func podPort(pod *corev1.Pod) uint16 {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			return uint16(p.ContainerPort)
		}
	}
	return 0
}

// waitReady waits (bounded) for the Pod's program to serve on ap: for
// its log to say ready when that is set, else for a connection to ap to
// succeed; a Pod without a port is ready as soon as its program runs.
func waitReady(ctx context.Context, proc *process, ap netip.AddrPort, ready string) error {
	if ap.Port() == 0 {
		return nil
	}
	deadline := time.Now().Add(readyWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if serving(proc, ap, ready) {
			return nil
		}
		if proc.exited() {
			return fmt.Errorf("%w before serving on %s; its log ends:\n%s", proc.exitError(), ap, proc.tail())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("waiting for the Pod's command to serve on %s: %w", ap, err)
	}
	return fmt.Errorf("the Pod's command did not serve on %s within %v", ap, readyWait)
}

// serving says whether proc serves on ap: its log holds ready, when set,
// or a connection to ap succeeds.
func serving(proc *process, ap netip.AddrPort, ready string) bool {
	if ready != "" {
		return strings.Contains(proc.tail(), ready)
	}
	c, err := net.DialTimeout("tcp", ap.String(), time.Second)
	if err != nil {
		return false
	}
	if err := c.Close(); err != nil {
		log.Printf("kubebed kubelet: closing a readiness probe of %s: %v", ap, err)
	}
	return true
}

// runningStatus is what a kubelet reports for a started, ready Pod.
func runningStatus(s *corev1.PodStatus, pod *corev1.Pod, addr netip.Addr) {
	now := metav1.Now()
	s.Phase = corev1.PodRunning
	s.HostIP, s.PodIP = "127.0.0.1", addr.String()
	s.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	s.PodIPs = []corev1.PodIP{{IP: addr.String()}}
	s.StartTime = &now
	s.Conditions = nil
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		s.Conditions = append(s.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	s.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: "kubebed://" + string(pod.UID) + "/" + c.Name,
			Ready: true, Started: new(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

// fail reports pod Failed with err as its message.
func (k *Kubelet) fail(ctx context.Context, pod *corev1.Pod, err error) {
	log.Printf("kubebed kubelet: Pod %s/%s failed: %v", pod.Namespace, pod.Name, err)
	k.setStatus(ctx, pod, func(s *corev1.PodStatus) {
		s.Phase, s.Reason, s.Message = corev1.PodFailed, "KubebedStartFailed", err.Error()
	})
}

// setStatus applies change to pod's latest status, retrying conflicts.
func (k *Kubelet) setStatus(ctx context.Context, pod *corev1.Pod, change func(*corev1.PodStatus)) {
	pods := k.client.CoreV1().Pods(pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID || cur.DeletionTimestamp != nil {
			return nil
		}
		change(&cur.Status)
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		log.Printf("kubebed kubelet: updating Pod %s/%s's status: %v", pod.Namespace, pod.Name, err)
	}
}

// finishDeletion stops pod's command and removes the Pod at once, as a
// kubelet does when its containers have stopped.
func (k *Kubelet) finishDeletion(ctx context.Context, pod *corev1.Pod) {
	k.stop(pod.UID)
	zero := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}}
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		log.Printf("kubebed kubelet: deleting Pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// forget stops a deleted Pod's command, in a goroutine of its own: a
// stop may take seconds, which the informer's handler must not wait.
func (k *Kubelet) forget(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	if pod, ok := o.(*corev1.Pod); ok {
		uid := pod.UID
		k.goPod(func() { k.stop(uid) })
	}
}

// stop ends uid's command, if it runs, and frees its address.
func (k *Kubelet) stop(uid types.UID) {
	k.mu.Lock()
	run := k.pods[uid]
	if run != nil {
		k.pods[uid] = &podRun{gone: true}
	}
	k.mu.Unlock()
	if run != nil && run.proc != nil {
		k.release(run)
	}
}

// release stops run's command and frees its address.
func (k *Kubelet) release(run *podRun) {
	if err := run.proc.stop(); err != nil {
		log.Printf("kubebed kubelet: %v", err)
	}
	k.addrs.put(run.addr)
}

// stopAll ends every Pod's command, at the bed's end.
func (k *Kubelet) stopAll() {
	k.mu.Lock()
	uids := make([]types.UID, 0, len(k.pods))
	for uid := range k.pods {
		uids = append(uids, uid)
	}
	k.mu.Unlock()
	for _, uid := range uids {
		k.stop(uid)
	}
}

// Running is how many Pods' commands run now.
func (k *Kubelet) Running() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, run := range k.pods {
		if run.proc != nil && !run.proc.exited() {
			n++
		}
	}
	return n
}
