package podclaim

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/podinit"
)

// Config says where a Claimer works and how often it writes.
type Config struct {
	// Namespace holds the warm pools and the claims (deploy/ installs
	// warden-sandboxes, where the router's Role grants its rights).
	Namespace string
	// ActivityInterval bounds how often one replica writes a session's
	// activity: at most once per interval, however many execs. The idle
	// reap adds it to the idle timeout, so activity a replica had not
	// yet written never gets a session reaped early.
	ActivityInterval time.Duration
	// ReadyTimeout bounds Claim's wait for the claim's Pod.
	ReadyTimeout time.Duration
	// Holder is HolderAnnotation's value for this replica on the claim
	// of the given UID (its address and proof), written with the Pod's
	// record at Claim and by Hold; nil or "" writes none (Hold then
	// removes a recorded one, so no replica forwards to a holder that
	// gave the session up).
	Holder func(claimUID types.UID) string
	// RouterKey (at least podinit.MinRouterKey bytes, every replica's the same)
	// seals the network record (NetworkAnnotation): a record it does not
	// check is refused, so whoever may patch claims cannot change a
	// session's egress.
	RouterKey []byte
	// Logger receives cleanup failures (nil: slog.Default()).
	Logger *slog.Logger
}

// holder is c's HolderAnnotation value for the claim uid, "" for none.
func (c *Claimer) holder(uid types.UID) string {
	if c.cfg.Holder == nil {
		return ""
	}
	return c.cfg.Holder(uid)
}

// Claimer claims, finds, touches and releases sessions' sandbox Pods
// with the rights of deploy/'s router Role, no more.
type Claimer struct {
	cfg   Config
	ext   *rest.RESTClient // extensions.agents.x-k8s.io: claims
	boxes *rest.RESTClient // agents.x-k8s.io: sandboxes
	pods  kubernetes.Interface
	log   *slog.Logger

	mu      sync.Mutex
	written map[string]time.Time // claim name: this replica's last activity write
	swept   time.Time            // when written was last swept
	deaths  *deaths              // WatchPods' watch, once started
	// syncWarn is how long WatchPods' first list may take before it is
	// warned of (0: syncWarnAfter; tests shorten it).
	syncWarn time.Duration
	// refused is when a claim's refused network record was last warned
	// of, by claim UID (made on first use; see warnRefusal).
	refused map[types.UID]time.Time
}

// New makes a Claimer reaching the API server with restConfig (the
// router's service account in a cluster).
func New(restConfig *rest.Config, cfg Config) (*Claimer, error) {
	if errs := validation.IsDNS1123Label(cfg.Namespace); len(errs) != 0 {
		return nil, fmt.Errorf("claimer namespace %q: %s", cfg.Namespace, errs[0])
	}
	if len(cfg.RouterKey) < podinit.MinRouterKey {
		return nil, fmt.Errorf("claimer: the router key has %d bytes, it needs at least %d: give the router key, which seals the sessions' network records", len(cfg.RouterKey), podinit.MinRouterKey)
	}
	if cfg.ActivityInterval <= 0 || cfg.ReadyTimeout <= 0 {
		return nil, fmt.Errorf("claimer: activity interval %v and ready timeout %v must both be positive", cfg.ActivityInterval, cfg.ReadyTimeout)
	}
	c := &Claimer{cfg: cfg, log: cfg.Logger, written: map[string]time.Time{}}
	if c.log == nil {
		c.log = slog.Default()
	}
	var err error
	if c.boxes, c.ext, err = SandboxClients(restConfig); err != nil {
		return nil, err
	}
	if c.pods, err = kubernetes.NewForConfig(restConfig); err != nil {
		return nil, fmt.Errorf("making a Pods client: %w", err)
	}
	return c, nil
}

// SandboxClients are REST clients of agent-sandbox's two API groups that
// encode and decode its own Go types: Sandbox (boxes), and the extensions'
// SandboxTemplate, SandboxWarmPool and SandboxClaim (ext). agent-sandbox
// ships no typed clientset, so the router and the test bed both make
// theirs here.
func SandboxClients(base *rest.Config) (boxes, ext *rest.RESTClient, err error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{sandboxv1.AddToScheme, extv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, nil, fmt.Errorf("registering agent-sandbox's types: %w", err)
		}
	}
	if boxes, err = typedClient(base, scheme, sandboxv1.GroupVersion); err != nil {
		return nil, nil, err
	}
	if ext, err = typedClient(base, scheme, extv1.GroupVersion); err != nil {
		return nil, nil, err
	}
	return boxes, ext, nil
}

// typedClient is a REST client of one agent-sandbox API group that
// encodes and decodes its own Go types.
func typedClient(base *rest.Config, scheme *runtime.Scheme, gv schema.GroupVersion) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(base)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("making a client for %s: %w", gv, err)
	}
	return c, nil
}
