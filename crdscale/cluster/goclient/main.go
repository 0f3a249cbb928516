// crdscale-client: real client-go clients that crdscale drives and measures.
//
// crdscale builds this file from Go modules (see crdscale/cluster/goclient) so
// that client-side results come from client-go itself, not a Python stand-in.
// Every mode prints one JSON object per line on stdout; "t" is seconds since
// the process started. Modes:
//
//	informers  reads GVRs (JSON lines on stdin) and runs a dynamic or metadata
//	           informer for each through one rest.Config (one HTTP/2 connection,
//	           as a controller manager), reporting when each synced and,
//	           periodically, its Go heap and RSS. Exits when stdin closes.
//	discovery  one cold discovery (client-go's discovery client, memory or disk
//	           cache, legacy or aggregated) through a token-bucket limiter of the
//	           given burst and QPS: per-request timings, limiter waits, wall time.
//	cachemem   an informer cache of one resource (Secrets, ConfigMaps, CRDs or a
//	           custom resource): full objects, metadata only, or full objects
//	           through a transform that strips managedFields and CRD schemas;
//	           peak Go heap, live heap after a GC, peak RSS, and what the cache
//	           still holds of what the transform strips.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/disk"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
)

var started = time.Now()

// out writes one JSON line per call; a mutex keeps lines whole across goroutines.
var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func emit(event string, fields map[string]any) {
	fields["event"] = event
	fields["t"] = round(time.Since(started).Seconds())
	out.Lock()
	defer out.Unlock()
	_ = out.enc.Encode(fields)
}

func round(s float64) float64 { return float64(int64(s*1e6)) / 1e6 }

func fail(format string, args ...any) {
	emit("error", map[string]any{"message": fmt.Sprintf(format, args...)})
	os.Exit(2)
}

func main() {
	klog.LogToStderr(true)
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdscale-client informers|discovery|cachemem [flags]")
		os.Exit(2)
	}
	mode, args := os.Args[1], os.Args[2:]
	switch mode {
	case "informers":
		runInformers(args)
	case "discovery":
		runDiscovery(args)
	case "cachemem":
		runCacheMem(args)
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", mode)
		os.Exit(2)
	}
}

// connection flags shared by every mode.
type connFlags struct {
	kubeconfig, context string
	qps                 float64
	burst               int
}

func (c *connFlags) register(fs *flag.FlagSet, qps float64, burst int) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, merged as kubectl does)")
	fs.StringVar(&c.context, "context", "", "kubeconfig context")
	fs.Float64Var(&c.qps, "qps", qps, "client-side rate limit, requests per second; <= 0 disables the limiter")
	fs.IntVar(&c.burst, "burst", burst, "client-side rate limiter burst")
}

func (c *connFlags) restConfig(userAgent string) *rest.Config {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.context}).ClientConfig()
	if err != nil {
		fail("kubeconfig: %v", err)
	}
	cfg.UserAgent = userAgent
	cfg.Burst = c.burst
	cfg.QPS = float32(c.qps)
	if c.qps <= 0 {
		cfg.QPS = -1 // rest.Config: a negative QPS means no client-side limiter
	}
	return cfg
}

// --- memory ---------------------------------------------------------------

// procStatusKiB reads VmRSS and VmHWM (peak RSS) from /proc/self/status, KiB.
func procStatusKiB() (rss, hwm int64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		}
	}
	return rss, hwm
}

// memSampler records the largest Go heap (HeapAlloc) seen between samples.
type memSampler struct {
	peakHeap atomic.Uint64
	stop     chan struct{}
}

func startSampler(every time.Duration, report func(runtime.MemStats)) *memSampler {
	s := &memSampler{stop: make(chan struct{})}
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			for {
				peak := s.peakHeap.Load()
				if ms.HeapAlloc <= peak || s.peakHeap.CompareAndSwap(peak, ms.HeapAlloc) {
					break
				}
			}
			if report != nil {
				report(ms)
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func memFields(ms runtime.MemStats) map[string]any {
	rss, hwm := procStatusKiB()
	return map[string]any{
		"heap_alloc_bytes": ms.HeapAlloc, "heap_inuse_bytes": ms.HeapInuse, "sys_bytes": ms.Sys,
		"gc_cycles": ms.NumGC, "goroutines": runtime.NumGoroutine(), "rss_kib": rss, "peak_rss_kib": hwm,
	}
}

// --- informers --------------------------------------------------------------

type gvrLine struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

func runInformers(args []string) {
	fs := flag.NewFlagSet("informers", flag.ExitOnError)
	var conn connFlags
	// controller-runtime's defaults (QPS 20, burst 30): providers are controller-runtime managers.
	conn.register(fs, 20, 30)
	kind := fs.String("kind", "dynamic", "dynamic (full objects) or metadata (PartialObjectMetadata)")
	memEvery := fs.Duration("mem-interval", 10*time.Second, "how often to report Go heap and RSS")
	name := fs.String("name", "crdscale-client", "client name, sent as the User-Agent")
	_ = fs.Parse(args)
	if *kind != "dynamic" && *kind != "metadata" {
		fail("--kind must be dynamic or metadata, got %q", *kind)
	}
	cfg := conn.restConfig(*name)
	// One rest.Config, one client: every informer's LIST and WATCH share its
	// transport, i.e. one HTTP/2 connection to the server, as in a controller manager.
	var newInformer func(schema.GroupVersionResource) informers.GenericInformer
	if *kind == "dynamic" {
		client, err := dynamic.NewForConfig(cfg)
		if err != nil {
			fail("dynamic client: %v", err)
		}
		newInformer = func(gvr schema.GroupVersionResource) informers.GenericInformer {
			return dynamicinformer.NewFilteredDynamicInformer(client, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil)
		}
	} else {
		client, err := metadata.NewForConfig(cfg)
		if err != nil {
			fail("metadata client: %v", err)
		}
		newInformer = func(gvr schema.GroupVersionResource) informers.GenericInformer {
			return metadatainformer.NewFilteredMetadataInformer(client, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil)
		}
	}
	stop := make(chan struct{})
	var synced, running atomic.Int64
	sampler := startSampler(*memEvery, func(ms runtime.MemStats) {
		f := memFields(ms)
		f["informers"], f["synced"] = running.Load(), synced.Load()
		emit("mem", f)
	})
	emit("ready", map[string]any{"pid": os.Getpid(), "go": runtime.Version(), "mode": "informers", "kind": *kind,
		"qps": cfg.QPS, "burst": cfg.Burst, "server": cfg.Host})

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	lines := make(chan gvrLine)
	go func() {
		scanner := bufio.NewScanner(os.Stdin)
		for scanner.Scan() {
			text := strings.TrimSpace(scanner.Text())
			if text == "" {
				continue
			}
			var g gvrLine
			if err := json.Unmarshal([]byte(text), &g); err != nil || g.Version == "" || g.Resource == "" {
				emit("bad_input", map[string]any{"line": text})
				continue
			}
			lines <- g
		}
		close(lines) // the parent is gone or done: stop
	}()
	seen := map[schema.GroupVersionResource]bool{}
	for {
		select {
		case <-signals:
			shutdown(stop, sampler, &synced, &running)
			return
		case g, ok := <-lines:
			if !ok {
				shutdown(stop, sampler, &synced, &running)
				return
			}
			gvr := schema.GroupVersionResource{Group: g.Group, Version: g.Version, Resource: g.Resource}
			if seen[gvr] {
				continue
			}
			seen[gvr] = true
			inf := newInformer(gvr).Informer()
			var watchErrors atomic.Int64
			_ = inf.SetWatchErrorHandler(func(r *cache.Reflector, err error) {
				// Report the first few per informer; the reflector retries with backoff anyway.
				if n := watchErrors.Add(1); n <= 3 {
					emit("watch_error", map[string]any{"group": g.Group, "version": g.Version, "resource": g.Resource,
						"count": n, "message": err.Error()})
				}
				cache.DefaultWatchErrorHandler(context.TODO(), r, err)
			})
			running.Add(1)
			added := time.Now()
			go inf.Run(stop)
			go func() {
				if cache.WaitForCacheSync(stop, inf.HasSynced) {
					synced.Add(1)
					emit("synced", map[string]any{"group": g.Group, "version": g.Version, "resource": g.Resource,
						"seconds": round(time.Since(added).Seconds()), "items": len(inf.GetStore().ListKeys())})
				}
			}()
		}
	}
}

func shutdown(stop chan struct{}, sampler *memSampler, synced, running *atomic.Int64) {
	close(stop)
	close(sampler.stop)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f := memFields(ms)
	f["informers"], f["synced"], f["peak_heap_bytes"] = running.Load(), synced.Load(), sampler.peakHeap.Load()
	emit("stopped", f)
}

// --- discovery ----------------------------------------------------------------

// timedLimiter wraps client-go's token bucket and records how long each request waited for it.
type timedLimiter struct {
	flowcontrol.RateLimiter
}

func (l timedLimiter) Wait(ctx context.Context) error {
	begin := time.Now()
	err := l.RateLimiter.Wait(ctx)
	emit("wait", map[string]any{"start_s": round(begin.Sub(started).Seconds()), "wait_s": round(time.Since(begin).Seconds())})
	return err
}

func (l timedLimiter) Accept() {
	_ = l.Wait(context.Background())
}

// timedTransport records each request: when it was sent, status, bytes and the
// time until its body was fully read.
type timedTransport struct{ next http.RoundTripper }

func (t timedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	begin := time.Now()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		emit("request", map[string]any{"path": req.URL.Path, "start_s": round(begin.Sub(started).Seconds()),
			"latency_s": round(time.Since(begin).Seconds()), "status": 0, "bytes": 0, "error": err.Error()})
		return resp, err
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, begin: begin, path: req.URL.Path, status: resp.StatusCode,
		proto: resp.Proto, contentType: resp.Header.Get("Content-Type")}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	begin       time.Time
	path, proto string
	contentType string
	status      int
	n           int64
	once        sync.Once
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err == io.EOF {
		b.report()
	}
	return n, err
}

func (b *countingBody) Close() error {
	b.report()
	return b.ReadCloser.Close()
}

func (b *countingBody) report() {
	b.once.Do(func() {
		emit("request", map[string]any{"path": b.path, "start_s": round(b.begin.Sub(started).Seconds()),
			"latency_s": round(time.Since(b.begin).Seconds()), "status": b.status, "bytes": b.n,
			"proto": b.proto, "content_type": b.contentType})
	})
}

func runDiscovery(args []string) {
	fs := flag.NewFlagSet("discovery", flag.ExitOnError)
	var conn connFlags
	// client-go's discovery defaults before kubectl raised them: burst 100 (the
	// discovery client's own default) at 5 QPS (rest.Config's default).
	conn.register(fs, 5, 100)
	cacheKind := fs.String("cache", "memory", "memory (memcache over the discovery client) or disk (kubectl's cache)")
	cacheDir := fs.String("cache-dir", "", "disk cache directory (must be empty for a cold run)")
	legacy := fs.Bool("legacy", true, "legacy discovery (/api, /apis, one GET per group-version); false: aggregated")
	_ = fs.Parse(args)
	cfg := conn.restConfig("crdscale-client/discovery")
	if cfg.QPS > 0 {
		cfg.RateLimiter = timedLimiter{flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)}
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return timedTransport{rt} })
	emit("ready", map[string]any{"pid": os.Getpid(), "go": runtime.Version(), "mode": "discovery", "cache": *cacheKind,
		"legacy": *legacy, "qps": cfg.QPS, "burst": cfg.Burst, "server": cfg.Host})

	var client discovery.DiscoveryInterface
	switch *cacheKind {
	case "memory":
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			fail("discovery client: %v", err)
		}
		dc.UseLegacyDiscovery = *legacy
		client = memory.NewMemCacheClient(dc)
	case "disk":
		if *cacheDir == "" {
			fail("--cache disk needs --cache-dir")
		}
		// kubectl's client: client-go picks aggregated discovery when the server offers it.
		dc, err := disk.NewCachedDiscoveryClientForConfig(cfg, *cacheDir+"/discovery", *cacheDir+"/http", 10*time.Minute)
		if err != nil {
			fail("disk discovery client: %v", err)
		}
		client = dc
	default:
		fail("--cache must be memory or disk, got %q", *cacheKind)
	}
	begin := time.Now()
	groups, resources, err := discovery.ServerGroupsAndResources(client)
	wall := time.Since(begin).Seconds()
	summary := map[string]any{"wall_s": round(wall), "groups": len(groups), "group_versions": len(resources)}
	if err != nil {
		summary["error"] = err.Error()
	}
	emit("summary", summary)
}

// --- cache memory -------------------------------------------------------------

// cacheTarget names what one cachemem run caches and how it decodes it.
type cacheTarget struct {
	gvr   schema.GroupVersionResource
	typed kruntime.Object // nil: unstructured, as a dynamic client decodes it
	rest  func(*rest.Config) (rest.Interface, error)
}

// cacheTargets are the resources cached as typed objects, because the clients the
// seeds measured decode them so: cainjector's Secrets, kube-apiserver's and
// controller-runtime's CRDs (crossplane-runtime#1056). Anything else is a custom
// resource, decoded as Unstructured maps like every client without its Go types.
var cacheTargets = map[string]cacheTarget{
	"secrets":    {corev1.SchemeGroupVersion.WithResource("secrets"), &corev1.Secret{}, coreREST},
	"configmaps": {corev1.SchemeGroupVersion.WithResource("configmaps"), &corev1.ConfigMap{}, coreREST},
	"customresourcedefinitions": {apiextv1.SchemeGroupVersion.WithResource("customresourcedefinitions"),
		&apiextv1.CustomResourceDefinition{}, func(cfg *rest.Config) (rest.Interface, error) {
			cs, err := apiextclient.NewForConfig(cfg)
			if err != nil {
				return nil, err
			}
			return cs.ApiextensionsV1().RESTClient(), nil
		}},
}

func coreREST(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.APIPath = "/api"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return rest.RESTClientFor(c)
}

// parseTarget reads --resource: a known name above, or GROUP/VERSION/RESOURCE.
func parseTarget(resource string) cacheTarget {
	if t, ok := cacheTargets[resource]; ok {
		return t
	}
	parts := strings.Split(resource, "/")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		fail("--resource must be secrets, configmaps, customresourcedefinitions or GROUP/VERSION/RESOURCE, got %q", resource)
	}
	return cacheTarget{gvr: schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}}
}

// stripForCache is the transform controllers set on their informers to keep what
// they never read out of the cache: managedFields of every object (server-side
// apply bookkeeping, often as large as the object's own fields) and, of a CRD, the
// OpenAPI schemas (crossplane-runtime's TransformStripCRDSchema, #1056). It runs
// before an object enters the store, so the decoded original becomes garbage at once.
func stripForCache(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *apiextv1.CustomResourceDefinition:
		for i := range o.Spec.Versions {
			o.Spec.Versions[i].Schema = nil
		}
	case *unstructured.Unstructured:
		if versions, ok := o.Object["spec"].(map[string]any)["versions"].([]any); ok && o.GetKind() == "CustomResourceDefinition" {
			for _, v := range versions {
				if m, ok := v.(map[string]any); ok {
					delete(m, "schema")
				}
			}
		}
	}
	return obj, nil
}

// cacheContents counts, in the synced store, what the transform is meant to remove,
// so a run shows that it did.
func cacheContents(items []any) (managedFields, schemas int) {
	for _, item := range items {
		if m, err := meta.Accessor(item); err == nil {
			managedFields += len(m.GetManagedFields())
		}
		switch o := item.(type) {
		case *apiextv1.CustomResourceDefinition:
			for _, v := range o.Spec.Versions {
				if v.Schema != nil {
					schemas++
				}
			}
		case *unstructured.Unstructured:
			versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
			for _, v := range versions {
				if m, ok := v.(map[string]any); ok && m["schema"] != nil {
					schemas++
				}
			}
		}
	}
	return managedFields, schemas
}

func runCacheMem(args []string) {
	fs := flag.NewFlagSet("cachemem", flag.ExitOnError)
	var conn connFlags
	conn.register(fs, 20, 30)
	kind := fs.String("kind", "full", "full (decoded objects), metadata (PartialObjectMetadata) or transform (full, minus managedFields and CRD schemas)")
	resource := fs.String("resource", "secrets", "secrets, configmaps, customresourcedefinitions or GROUP/VERSION/RESOURCE (a custom resource)")
	namespace := fs.String("namespace", "default", "namespace whose objects are cached; empty: all namespaces")
	selector := fs.String("label-selector", "", "cache only objects with these labels")
	sampleEvery := fs.Duration("sample-interval", 20*time.Millisecond, "Go heap sampling interval")
	_ = fs.Parse(args)
	if *kind != "full" && *kind != "metadata" && *kind != "transform" {
		fail("--kind must be full, metadata or transform, got %q", *kind)
	}
	target := parseTarget(*resource)
	cfg := conn.restConfig("crdscale-client/cachemem")
	withSelector := func(o *metav1.ListOptions) { o.LabelSelector = *selector }

	var inf cache.SharedIndexInformer
	decoded := "unstructured"
	switch {
	case *kind == "metadata":
		client, err := metadata.NewForConfig(cfg)
		if err != nil {
			fail("metadata client: %v", err)
		}
		inf = metadatainformer.NewFilteredMetadataInformer(client, target.gvr, *namespace, 0, cache.Indexers{}, withSelector).Informer()
		decoded = "metadata"
	case target.typed != nil:
		// A typed cache as controller-runtime builds it: the group's REST client, scheme codecs.
		rc, err := target.rest(cfg)
		if err != nil {
			fail("rest client: %v", err)
		}
		lw := cache.NewFilteredListWatchFromClient(rc, target.gvr.Resource, *namespace, withSelector)
		inf = cache.NewSharedIndexInformer(lw, target.typed, 0, cache.Indexers{})
		decoded = "typed"
	default:
		client, err := dynamic.NewForConfig(cfg)
		if err != nil {
			fail("dynamic client: %v", err)
		}
		inf = dynamicinformer.NewFilteredDynamicInformer(client, target.gvr, *namespace, 0, cache.Indexers{}, withSelector).Informer()
	}
	if *kind == "transform" {
		if err := inf.SetTransform(stripForCache); err != nil {
			fail("set transform: %v", err)
		}
	}
	// The baseline is a collected heap with every client built: what remains after
	// the final GC minus this is what the cache holds.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseRSS, _ := procStatusKiB()
	baseHeap := ms.HeapAlloc
	sampler := startSampler(*sampleEvery, nil)

	stop := make(chan struct{})
	begin := time.Now()
	go inf.Run(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		fail("cache did not sync")
	}
	syncS := time.Since(begin).Seconds()
	items := inf.GetStore().List()
	managedFields, schemas := cacheContents(items)
	time.Sleep(5 * *sampleEvery)
	close(sampler.stop)
	runtime.GC() // what the cache keeps, once the list's garbage is gone
	runtime.ReadMemStats(&ms)
	rss, hwm := procStatusKiB()
	runtime.KeepAlive(items)
	close(stop)
	emit("cachemem", map[string]any{
		"kind": *kind, "resource": target.gvr.String(), "decoded": decoded, "items": len(items), "sync_s": round(syncS),
		"watch_list":     clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient),
		"managed_fields": managedFields, "schemas": schemas,
		"baseline_heap_bytes": baseHeap, "peak_heap_bytes": sampler.peakHeap.Load(), "live_heap_bytes": ms.HeapAlloc,
		"baseline_rss_kib": baseRSS, "rss_kib": rss, "peak_rss_kib": hwm, "gc_cycles": ms.NumGC,
	})
}
