// Package kubebed is Warden's Kubernetes test bed: a real kube-apiserver
// on Debian's etcd, kube-controller-manager's garbage collector,
// agent-sandbox's CRDs and its real controller (the programs make
// kube-tools builds from tools/kube), and a simulated
// kubelet that runs each Pod as a local process on a loopback address of
// its own. Real Pods cannot run on the machines the suite runs on (no
// container registry, cgroup v1), and every layer above the kubelet is
// the real code, so tests of Warden on Kubernetes run against it.
package kubebed

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// Programs the bed runs, under the repository's bin/tools/kube (make
// kube-tools) except etcd, found on PATH (Debian's etcd-server).
const (
	apiServerBin         = "kube-apiserver"
	controllerManagerBin = "kube-controller-manager"
	controllerBin        = "agent-sandbox-controller"
	etcdBin              = "etcd"
)

// AgentSandboxDir is where the repository keeps agent-sandbox's install
// manifests (its CRDs, RBAC and controller), relative to its root: the
// bed installs the CRDs and RBAC from there, so its tests also check
// what deploy/ installs.
const AgentSandboxDir = "deploy/kustomize/agent-sandbox"

// Bed is a running test bed. Its clients act as a cluster admin.
type Bed struct {
	// Dir holds the bed's keys, data and every program's log (Pods'
	// under pods/).
	Dir string
	// Config reaches the API server as an admin, for more clients.
	Config *rest.Config
	// RouterConfig reaches it as the router's service account
	// (RouterUser), which may do only what deploy/'s router Role grants
	// once a test applies it.
	RouterConfig *rest.Config
	// Clientset is client-go's typed client of the built-in APIs.
	Clientset kubernetes.Interface
	// Dynamic reaches any resource, CRDs included.
	Dynamic dynamic.Interface
	// Sandboxes is a typed client of agents.x-k8s.io/v1beta1 (Sandbox)
	// and Extensions of extensions.agents.x-k8s.io/v1beta1
	// (SandboxTemplate, SandboxWarmPool, SandboxClaim), both with
	// agent-sandbox's own Go types.
	Sandboxes, Extensions *rest.RESTClient
	// Kubelet is the simulated node.
	Kubelet *Kubelet

	mapper *restmapper.DeferredDiscoveryRESTMapper
	api    *apiServer
}

// Start brings a bed up for t, with command standing in for each Pod's
// containers, and tears it all down (processes stopped, files removed)
// when t ends. It skips t, or fails it under WARDEN_CI=1, when etcd or
// the programs of make kube-tools are missing.
func Start(t testing.TB, command PodCommand) *Bed {
	t.Helper()
	if err := processesSupported(); err != nil {
		testhost.SkipOrFail(t, "the bed's processes need Linux: "+err.Error())
	}
	etcd := testhost.RequireTool(t, etcdBin)
	bins := requireTools(t)
	b := &Bed{Dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 3*startWait)
	defer cancel()
	etcdProc, etcdURL, err := startEtcd(ctx, b.Dir, etcd)
	stopAtEnd(t, etcdProc)
	if err != nil {
		t.Fatal(err)
	}
	b.api, err = startAPIServer(ctx, b.Dir, bins[apiServerBin], etcdURL)
	if b.api != nil {
		stopAtEnd(t, b.api.proc)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := b.connect(); err != nil {
		t.Fatal(err)
	}
	if err := b.install(ctx); err != nil {
		t.Fatal(err)
	}
	b.startKubelet(t, command)
	b.startGarbageCollector(t, bins[controllerManagerBin])
	b.startController(ctx, t, bins[controllerBin])
	return b
}

// requireTools finds make kube-tools' programs.
func requireTools(t testing.TB) map[string]string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins := map[string]string{}
	for _, name := range []string{apiServerBin, controllerManagerBin, controllerBin} {
		path := filepath.Join(root, "bin", "tools", "kube", name)
		if _, err := os.Stat(path); err != nil {
			testhost.SkipOrFail(t, name+" is not built (make kube-tools builds it): "+err.Error())
		}
		bins[name] = path
	}
	return bins
}

// stopAtEnd stops p when t ends, logging a failure to stop.
func stopAtEnd(t testing.TB, p *process) {
	if p == nil {
		return
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("stopping the bed: %v", err)
		}
	})
}

// connect makes the bed's admin clients.
func (b *Bed) connect() error {
	b.Config = b.api.restConfig(b.api.adminToken)
	b.RouterConfig = b.api.restConfig(b.api.routerToken)
	var err error
	if b.Clientset, err = kubernetes.NewForConfig(b.Config); err != nil {
		return fmt.Errorf("making the bed's clientset: %w", err)
	}
	if b.Dynamic, err = dynamic.NewForConfig(b.Config); err != nil {
		return fmt.Errorf("making the bed's dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(b.Config)
	if err != nil {
		return fmt.Errorf("making the bed's discovery client: %w", err)
	}
	b.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	b.Sandboxes, b.Extensions, err = podclaim.SandboxClients(b.Config)
	return err
}

// install creates agent-sandbox's CRDs, namespace, service account and
// RBAC from the repository's copy of its manifests (all but the
// controller's Deployment and Service: the bed runs the controller
// itself), waits for the CRDs to be served, and makes the default
// namespace's service account, which the controller-manager the bed does
// not run would make and Pod admission requires.
func (b *Bed) install(ctx context.Context) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, AgentSandboxDir)
	crds, err := filepath.Glob(filepath.Join(dir, "crds", "*.yaml"))
	if err != nil {
		return fmt.Errorf("finding agent-sandbox's CRDs: %w", err)
	}
	files := append(crds, "controller.yaml", "rbac.generated.yaml", "extensions.yaml", "extensions-rbac.generated.yaml")
	for i := len(crds); i < len(files); i++ {
		files[i] = filepath.Join(dir, files[i])
	}
	objs, err := ReadManifests(files...)
	if err != nil {
		return err
	}
	var keep []*unstructured.Unstructured
	for _, o := range objs {
		if k := o.GetKind(); k != "Deployment" && k != "Service" {
			keep = append(keep, o)
		}
	}
	if err := b.Apply(ctx, false, keep...); err != nil {
		return fmt.Errorf("installing agent-sandbox: %w", err)
	}
	if err := b.waitEstablished(ctx, crdNames(keep)); err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := b.Clientset.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the default service account: %w", err)
	}
	return nil
}

// crdNames are the names of the CustomResourceDefinitions among objs.
func crdNames(objs []*unstructured.Unstructured) []string {
	var names []string
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			names = append(names, o.GetName())
		}
	}
	return names
}

// crdResource is the API resource of CustomResourceDefinitions.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// waitEstablished waits (bounded) until the API server serves each CRD.
func (b *Bed) waitEstablished(ctx context.Context, names []string) error {
	deadline := time.Now().Add(startWait)
	for _, name := range names {
		for {
			crd, err := b.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err == nil && established(crd) {
				break
			}
			if time.Now().After(deadline) && err != nil {
				return fmt.Errorf("reading CRD %s, not established within %v: %w", name, startWait, err)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s was not established within %v", name, startWait)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	b.mapper.Reset()
	return nil
}

// established reports whether crd's Established condition is True.
func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// startKubelet registers the simulated node and serves Pods until t ends.
func (b *Bed) startKubelet(t testing.TB, command PodCommand) {
	t.Helper()
	k, err := newKubelet(b.Clientset, command, b.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		k.shutdown()
	})
	if err := k.run(ctx); err != nil {
		t.Fatal(err)
	}
	b.Kubelet = k
}

// startGarbageCollector runs kube-controller-manager with only its
// garbage collector: agent-sandbox leaves a deleted claim's Sandbox and a
// deleted Sandbox's Pod to owner references, which only it follows. It
// serves no port; a failure shows in the tests' waits and its log.
func (b *Bed) startGarbageCollector(t testing.TB, bin string) {
	t.Helper()
	kubeconfig := filepath.Join(b.Dir, "controller-manager.kubeconfig")
	if err := b.api.writeKubeconfig(kubeconfig, b.api.adminToken); err != nil {
		t.Fatal(err)
	}
	p, err := startProcess(b.Dir, controllerManagerBin, bin, []string{
		"--kubeconfig=" + kubeconfig, "--controllers=garbagecollector",
		"--leader-elect=false", "--secure-port=0",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, p)
}

// startController runs agent-sandbox's controller, extensions on, as its
// own service account, and waits for its readiness endpoint.
func (b *Bed) startController(ctx context.Context, t testing.TB, bin string) {
	t.Helper()
	kubeconfig := filepath.Join(b.Dir, "controller.kubeconfig")
	if err := b.api.writeKubeconfig(kubeconfig, b.api.controllerToken); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	probe := "127.0.0.1:" + strconv.Itoa(port)
	p, err := startProcess(b.Dir, controllerBin, bin, []string{
		"--extensions", "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=" + probe,
	}, []string{"KUBECONFIG=" + kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, p)
	ready := func() bool { return httpOK(ctx, http.DefaultClient, "http://"+probe+"/readyz", "") }
	if err := waitStarted(ctx, p, "agent-sandbox's controller's /readyz", ready); err != nil {
		t.Fatal(err)
	}
}

// Log is the end of a program's log (etcd, kube-apiserver,
// agent-sandbox-controller), for a failing test's message.
func (b *Bed) Log(name string) string {
	p := process{name: name, log: filepath.Join(b.Dir, name+".log")}
	return p.tail()
}
