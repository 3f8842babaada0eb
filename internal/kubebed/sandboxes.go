package kubebed

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// sandboxScheme knows agent-sandbox's own Go types: Sandbox, and the
// extensions' SandboxTemplate, SandboxWarmPool and SandboxClaim.
func sandboxScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{sandboxv1.AddToScheme, extv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("registering agent-sandbox's types: %w", err)
		}
	}
	return s, nil
}

// typedClient is a REST client for one API group of agent-sandbox that
// encodes and decodes its Go types, e.g.
// b.Extensions.Post().Namespace(ns).Resource("sandboxclaims").Body(claim).Do(ctx).Into(&got).
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
