//go:build !slim

package main

import (
	"errors"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/warden-sandbox/warden/internal/kubeback"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// addKubeFlags adds the kubernetes backend's settings to serve's flags
// and makes the backend from them when --backend kubernetes asks for it:
// only serve links the Kubernetes client (see BackendOptions.Kubernetes).
func addKubeFlags(f *pflag.FlagSet, o *sandbox.BackendOptions) {
	var cfg kubeback.Config
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster for --backend kubernetes (default: the Pod's in-cluster service account)")
	f.StringVar(&cfg.Namespace, "kube-namespace", kubeback.DefaultNamespace, "namespace of the sandbox Pods' warm pools and claims for --backend kubernetes")
	f.StringVar(&cfg.RouterKeyFile, "kube-router-key", "", "file of the router key for --backend kubernetes (at least 32 random bytes, shared by every replica; required)")
	f.StringVar(&cfg.Template, "kube-template", kubeback.DefaultTemplate, "SandboxTemplate and SandboxWarmPool of a session that names no template, for --backend kubernetes")
	f.StringSliceVar(&cfg.Templates, "kube-templates", nil, "other SandboxTemplates (and warm pools) a session may name, for --backend kubernetes; any tenant may claim from each, and other names are refused")
	f.Float32Var(&cfg.QPS, "kube-qps", kubeback.DefaultQPS, "API server requests per second this replica makes at most, for --backend kubernetes (every session's claims, lookups, activity and the reaper share them)")
	f.StringVar(&cfg.Advertise, "kube-advertise", "", "this replica's IP:port as the other replicas reach it (its Pod IP and API port), for --backend kubernetes: recorded on its sessions' claims, so that the others forward those sessions' requests here (none: never forwarded to)")
	f.IntVar(&cfg.Burst, "kube-burst", kubeback.DefaultBurst, "API server requests this replica may make in a burst above --kube-qps, for --backend kubernetes")
	o.Kubernetes = func(name string) (sandbox.Backend, error) {
		cfg.Logger = o.Logger
		b, err := kubeback.New(name, cfg)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}

// checkKubeKeys refuses a keyless server on the kubernetes backend: its
// claims record each session's owner (an API key's tenant), and a
// keyless server has none.
func checkKubeKeys(backend string, keys []string) error {
	if backend == sandbox.KubernetesBackend && len(keys) == 0 {
		return errors.New("--backend kubernetes needs API keys (--api-key-file or WARDEN_API_KEYS): each session's claim records its key's tenant, which every replica checks")
	}
	return nil
}

// remoteStateDir is the state directory serve keeps session records in:
// none for a backend whose sessions the cluster records (a record here
// would bring a session back as dead after a restart, shadowing the live
// one any replica finds on its claim), else dir.
func remoteStateDir(b sandbox.Backend, dir string, log *slog.Logger) string {
	if _, remote := b.(sandbox.RemoteBackend); !remote {
		return dir
	}
	if dir != "none" && dir != "" {
		log.Info("sessions' state is kept by the backend, not in --state-dir", "backend", b.Name(), "state-dir", dir)
	}
	return "none"
}
