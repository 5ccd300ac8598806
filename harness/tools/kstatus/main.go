// Command kstatus prints what kstatus (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute) says of
// Kubernetes objects: the same computation Flux, kpt and `kubectl wait`-style tools make.
//
//	kstatus < objects.yaml                          objects as JSON or YAML (several documents,
//	                                                or a List) on stdin
//	kstatus --kubeconfig K [-n NS] TYPE/NAME ...    objects read from the API server, where TYPE
//	                                                is a kind or resource name as kubectl takes it
//	                                                (agentspec, agentspecs.bindery.dev, ...)
//
// One JSON line per object: {"apiVersion", "kind", "namespace", "name", "status", "message"}.
// Exit status 1 on any error (unreadable input, an object that cannot be fetched or computed).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	sigsyaml "sigs.k8s.io/yaml"
)

type result struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Status     string `json:"status"`
	Message    string `json:"message"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig used to fetch TYPE/NAME arguments")
	namespace := flag.String("n", "", "namespace of namespaced TYPE/NAME arguments (default: the kubeconfig's)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kstatus < objects.yaml  |  kstatus --kubeconfig FILE [-n NS] TYPE/NAME ...")
		flag.PrintDefaults()
	}
	flag.Parse()

	var objects []*unstructured.Unstructured
	var err error
	if flag.NArg() == 0 {
		objects, err = decode(os.Stdin)
	} else {
		objects, err = fetch(*kubeconfig, *namespace, flag.Args())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	for _, obj := range objects {
		res, err := status.Compute(obj)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %s %s/%s: computing status: %v\n", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
			os.Exit(1)
		}
		_ = out.Encode(result{
			APIVersion: obj.GetAPIVersion(),
			Kind:       obj.GetKind(),
			Namespace:  obj.GetNamespace(),
			Name:       obj.GetName(),
			Status:     res.Status.String(),
			Message:    res.Message,
		})
	}
}

// decode reads a stream of JSON or YAML documents; a List contributes its items.
func decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	docs := yaml.NewYAMLReader(bufio.NewReader(r))
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading stdin document %d: %w", i, err)
		}
		raw, err := sigsyaml.YAMLToJSON(doc) // JSON is YAML too
		if err != nil {
			return nil, fmt.Errorf("stdin document %d is neither JSON nor YAML: %w", i, err)
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		// The unstructured scheme reads integers as int64, as kstatus expects of generations.
		obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, raw)
		if err != nil {
			return nil, fmt.Errorf("stdin document %d is not a Kubernetes object (give whole objects, as kubectl get -o json prints them): %w", i, err)
		}
		switch o := obj.(type) {
		case *unstructured.UnstructuredList:
			for j := range o.Items {
				out = append(out, &o.Items[j])
			}
		case *unstructured.Unstructured:
			out = append(out, o)
		default:
			return nil, fmt.Errorf("stdin document %d decodes to %T, not an object", i, obj)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no objects on stdin: pipe objects as JSON or YAML, or name them as TYPE/NAME")
	}
	return out, nil
}

// fetch reads TYPE/NAME objects from the API server the kubeconfig points at.
func fetch(kubeconfig, namespace string, refs []string) ([]*unstructured.Unstructured, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %q: %w", kubeconfig, err)
	}
	if namespace == "" {
		if namespace, _, err = loader.Namespace(); err != nil {
			return nil, fmt.Errorf("kubeconfig %q: reading its namespace: %w", kubeconfig, err)
		}
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client for %s: %w", cfg.Host, err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", cfg.Host, err)
	}
	var out []*unstructured.Unstructured
	for _, ref := range refs {
		typ, name, ok := strings.Cut(ref, "/")
		if !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("argument %q is not TYPE/NAME (e.g. agentspec/my-agent)", ref)
		}
		gvr, err := mapper.ResourceFor(schema.ParseGroupResource(typ).WithVersion(""))
		if err != nil {
			return nil, fmt.Errorf("argument %q: the API server at %s serves no resource %q: %w", ref, cfg.Host, typ, err)
		}
		mapping, err := mapper.RESTMapping(schema.GroupKind{Group: gvr.Group, Kind: mustKind(mapper, gvr)}, gvr.Version)
		if err != nil {
			return nil, fmt.Errorf("argument %q: %w", ref, err)
		}
		var res dynamic.ResourceInterface = client.Resource(gvr)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			res = client.Resource(gvr).Namespace(namespace)
		}
		obj, err := res.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading %s %q in namespace %q: %w", gvr.Resource, name, namespace, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

func mustKind(mapper meta.RESTMapper, gvr schema.GroupVersionResource) string {
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return ""
	}
	return gvk.Kind
}
