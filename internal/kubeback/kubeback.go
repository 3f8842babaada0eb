// Package kubeback is Warden's kubernetes backend (issue 23): a session
// is a SandboxClaim against a SandboxWarmPool (internal/podclaim) and
// its box is the claimed Pod's agent, reached over TCP (internal/poddial).
// Everything a server needs to serve a session is on its claim, so any
// `warden serve --backend kubernetes` replica serves any session.
package kubeback

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Defaults of Config's zero fields.
const (
	// DefaultNamespace is where deploy/ installs the warm pools and the
	// router's Role.
	DefaultNamespace = "warden-sandboxes"
	// DefaultTemplate is the SandboxTemplate and SandboxWarmPool a
	// session naming no template claims from (deploy/ installs it).
	DefaultTemplate = "default"
	// DefaultActivityInterval bounds how often a replica records a
	// session's activity on its claim (podclaim.Config).
	DefaultActivityInterval = 30 * time.Second
	// DefaultReadyTimeout bounds a claim's wait for a warm Pod.
	DefaultReadyTimeout = 30 * time.Second
	// DefaultQPS and DefaultBurst bound the replica's API calls (every
	// session's Claim, Find, Touch, Release and the Reap share them):
	// client-go's own 5 and 10 would let one tenant's lookups stall every
	// other tenant's creates, touches and releases.
	DefaultQPS   = 50
	DefaultBurst = 100
)

// Config is what the backend needs of the cluster and of the operator.
type Config struct {
	// Kubeconfig is a kubeconfig file; "" uses the Pod's in-cluster
	// service account, as the router's Deployment runs.
	Kubeconfig string
	// Namespace holds the claims and warm pools (DefaultNamespace).
	Namespace string
	// RouterKeyFile holds the router key, at least
	// podinit.MinRouterKey random bytes, shared by every replica (a
	// Secret mounted into the router's Pods only): each Pod's key is
	// derived from it. Required: without it no Pod can be reached.
	RouterKeyFile string
	// Template is the SandboxTemplate (and SandboxWarmPool of the same
	// name) of a session that names none (DefaultTemplate); a session's
	// template names one directly.
	Template string
	// Templates are the other SandboxTemplates (and warm pools) a
	// session may name: any tenant may claim from each. A pool an
	// operator adds for one tenant must not be open to all, so a name
	// neither here nor Template is refused.
	Templates []string
	// ActivityInterval and ReadyTimeout are podclaim.Config's (the
	// Default ones when zero).
	ActivityInterval, ReadyTimeout time.Duration
	// QPS and Burst bound this replica's calls to the API server
	// (DefaultQPS and DefaultBurst when zero).
	QPS   float32
	Burst int
	// Advertise is this replica's address as the other replicas reach
	// it ("IP:port", ParseAdvertise; deploy/ gives the Pod IP and the
	// API port), recorded on the claims of the sessions it holds so that
	// they forward those sessions' requests here. "" records none: the
	// replica still forwards to others, but is never forwarded to.
	Advertise string
	// Logger receives cleanup failures and notes (slog.Default()).
	Logger *slog.Logger
}

// withDefaults fills c's zero fields.
func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Template == "" {
		c.Template = DefaultTemplate
	}
	if c.ActivityInterval <= 0 {
		c.ActivityInterval = DefaultActivityInterval
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.QPS <= 0 {
		c.QPS = DefaultQPS
	}
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// checkTemplate refuses a session's template name that is neither
// c.Template nor in c.Templates ("" is c.Template).
func (c Config) checkTemplate(name string) error {
	if name == "" || name == c.Template || slices.Contains(c.Templates, name) {
		return nil
	}
	return fmt.Errorf("%w: template %q is not one this server serves: use %q or one of --kube-templates %q", spec.ErrInvalid, name, c.Template, c.Templates)
}

// RestConfig is how the backend reaches the API server: the kubeconfig
// file, or the in-cluster service account when there is none.
func (c Config) RestConfig() (*rest.Config, error) {
	if c.Kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig is not given and this is not a Pod of a cluster (%w): give a kubeconfig file", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", c.Kubeconfig, err)
	}
	return rc, nil
}

// ownerContext separates OwnerLabel's HMAC from the router key's other
// uses (a Pod's key is derived from it too).
const ownerContext = "warden kube owner label\x00"

// OwnerLabel is the owner label a claim of owner's sessions carries: an
// HMAC of owner with the router key, so that whoever reads claims cannot
// test guesses of a tenant's API key against it offline (owner is an
// unsalted hash of the key). Operators find a tenant's claims by it.
func OwnerLabel(routerKey []byte, owner string) string {
	m := hmac.New(sha256.New, routerKey)
	m.Write([]byte(ownerContext + owner))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// RouterKey reads the router key from c.RouterKeyFile, refusing a
// missing file or a key too short to derive Pods' keys from.
func (c Config) RouterKey() ([]byte, error) {
	if c.RouterKeyFile == "" {
		return nil, fmt.Errorf("--kube-router-key is not given: the kubernetes backend needs the router key file (at least %d random bytes, from a Secret mounted into the router's Pods)", podinit.MinRouterKey)
	}
	key, err := os.ReadFile(c.RouterKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--kube-router-key: %w", err)
	}
	if len(key) < podinit.MinRouterKey {
		return nil, fmt.Errorf("--kube-router-key %s has %d bytes: it needs at least %d random ones (e.g. head -c 32 /dev/urandom)", c.RouterKeyFile, len(key), podinit.MinRouterKey)
	}
	return key, nil
}
