package kubebed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// maxManifest bounds one manifest file the bed reads.
const maxManifest = 4 << 20

// RepoRoot is the repository this package is built from: the bed finds
// its programs (bin/tools/kube) and manifests (deploy/) there.
func RepoRoot() (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("finding the repository from kubebed's source")
	}
	return filepath.Join(filepath.Dir(self), "..", ".."), nil
}

// ReadManifests decodes the Kubernetes objects of the YAML files at
// paths (several documents per file allowed), in order.
func ReadManifests(paths ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading manifest: %w", err)
		}
		if len(b) > maxManifest {
			return nil, fmt.Errorf("manifest %s is %d bytes, over the %d the bed reads", path, len(b), maxManifest)
		}
		got, err := DecodeManifests(b)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		objs = append(objs, got...)
	}
	return objs, nil
}

// DecodeManifests decodes the YAML or JSON documents of b, skipping
// empty ones; each must name its apiVersion and kind.
func DecodeManifests(b []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return nil, fmt.Errorf("document %d has no apiVersion or kind", i)
		}
		objs = append(objs, u)
	}
}

// fieldManager names the bed in the managed fields of what it applies.
const fieldManager = "kubebed"

// Apply applies objs in order by server-side apply, as kubectl apply
// --server-side would, looking each kind up in the API server's
// discovery (refreshed once when a kind is new, e.g. after its CRD). A
// namespaced object without a namespace goes to "default". With dryRun
// the server validates, defaults and admits each object, new or
// existing, but stores none: a check of install manifests against the
// real schemas, CRDs' included.
func (b *Bed) Apply(ctx context.Context, dryRun bool, objs ...*unstructured.Unstructured) error {
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, obj := range objs {
		mapping, err := b.mapping(obj.GroupVersionKind())
		if err != nil {
			return err
		}
		res := b.Dynamic.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace("default")
			}
			_, err = res.Namespace(obj.GetNamespace()).Apply(ctx, obj.GetName(), obj, opts)
		} else {
			_, err = res.Apply(ctx, obj.GetName(), obj, opts)
		}
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// mapping finds gvk's resource, refreshing discovery once if it is new.
func (b *Bed) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		b.mapper.Reset()
		m, err = b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("finding the API resource of %s: %w", gvk, err)
	}
	return m, nil
}
