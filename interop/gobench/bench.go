package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/kubernetes/scheme"
)

// counterAnnotation is what a guaranteed update changes, so that every update writes.
const counterAnnotation = "bench.apistore.io/counter"

// bench is kube's etcd3 store for Pods, its codec, and a plain etcd client to read
// the stored values for the decode timing.
type bench struct {
	store   storage.Interface
	destroy factory.DestroyFunc
	codec   kruntime.Codec
	etcd    *clientv3.Client
	// cache is kube's watch cache over a store of its own, between cacheStart and
	// cacheStop; config makes that store.
	cache  *cacher
	config *storagebackend.Config
}

func newBench(endpoints []string, prefix string) (*bench, error) {
	// As kube-apiserver's etcd options fill it, minus its background work.
	config := storagebackend.NewDefaultConfig(prefix, nil)
	config.Transport.ServerList = endpoints
	config.CompactionInterval = 0
	config.DBMetricPollInterval = 0
	config.CountMetricPollPeriod = 0

	gv := v1.SchemeGroupVersion
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	codec, encodeVersioner, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  kruntime.ContentTypeProtobuf,
		StorageSerializer: codecs,
		StorageVersion:    gv,
		MemoryVersion:     gv,
		Config:            *config,
	})
	if err != nil {
		return nil, fmt.Errorf("storage codec: %w", err)
	}
	config.Codec = codec
	config.EncodeVersioner = encodeVersioner

	store, destroy, err := newPodStore(config)
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second})
	if err != nil {
		destroy()
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return &bench{store: store, destroy: destroy, codec: codec, etcd: client, config: config}, nil
}

// newPodStore is kube's etcd3 store of Pods as the registry creates it.
func newPodStore(config *storagebackend.Config) (storage.Interface, factory.DestroyFunc, error) {
	newFunc := func() kruntime.Object { return &v1.Pod{} }
	newListFunc := func() kruntime.Object { return &v1.PodList{} }
	store, destroy, err := factory.Create(*config.ForResource(schema.GroupResource{Resource: "pods"}), newFunc, newListFunc, "/pods")
	if err != nil {
		return nil, nil, fmt.Errorf("storage: %w", err)
	}
	return store, destroy, nil
}

func (b *bench) close() {
	b.stopCache()
	b.destroy()
	_ = b.etcd.Close()
}

func (b *bench) handle(ctx context.Context, req request) response {
	var (
		resp response
		err  error
	)
	switch req.Op {
	case "crud":
		resp, err = b.crud(ctx, req)
	case "list":
		resp, err = b.list(ctx, req)
	case "decode":
		resp, err = b.decode(ctx, req)
	case "cacheStart":
		resp, err = b.startCache(ctx, req)
	case "cacheStop":
		b.stopCache()
	case "cacheWatch":
		resp, err = b.cacheWatch(ctx, req)
	case "cacheWatchWait":
		resp, err = b.cacheWatchWait(ctx, req)
	case "writeThroughput":
		resp, err = b.writeThroughput(ctx, req)
	default:
		err = fmt.Errorf("unknown op %q", req.Op)
	}
	if err != nil {
		return failure(err)
	}
	resp.OK = true
	return resp
}

// podAttrs are the Pod's selectable fields the list workloads select on, as the Pod
// registry exposes them.
func podAttrs(obj kruntime.Object) (labels.Set, fields.Set, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil, fmt.Errorf("not a Pod: %T", obj)
	}
	return labels.Set(pod.Labels), fields.Set{
		"metadata.name":      pod.Name,
		"metadata.namespace": pod.Namespace,
		"spec.nodeName":      pod.Spec.NodeName,
	}, nil
}

// poolKey is the storage key of the pool's i-th Pod.
func poolKey(req request, i int) string {
	return fmt.Sprintf("/pods/%s/%s%05d", req.PoolNamespace, req.NamePrefix, i)
}

// pick is what the seq-th call of a caller takes out of count choices (the harness
// rotates the same way).
func pick(caller, seq, count int) int {
	if count <= 0 {
		return 0
	}
	return (caller*7919 + seq) % count
}

// crud runs one timed create, get or guaranteed update run.
func (b *bench) crud(ctx context.Context, req request) (response, error) {
	if req.Pool <= 0 || req.Callers <= 0 {
		return response{}, fmt.Errorf("crud needs a pool and callers")
	}
	var template v1.Pod
	if err := b.store.Get(ctx, poolKey(req, 0), storage.GetOptions{}, &template); err != nil {
		return response{}, fmt.Errorf("read the template Pod: %w", err)
	}
	slice := req.Pool / req.Callers
	if slice == 0 {
		slice = 1
	}
	call := func(caller int, seq int) error {
		switch req.Crud {
		case "create":
			pod := template.DeepCopy()
			pod.ResourceVersion = ""
			pod.Name = fmt.Sprintf("go-%02d-%07d", caller, seq)
			pod.Namespace = req.Namespace
			pod.UID = ""
			out := &v1.Pod{}
			return b.store.Create(ctx, "/pods/"+req.Namespace+"/"+pod.Name, pod, out, 0)
		case "get":
			out := &v1.Pod{}
			return b.store.Get(ctx, poolKey(req, pick(caller, seq, req.Pool)), storage.GetOptions{}, out)
		case "update":
			out := &v1.Pod{}
			key := poolKey(req, (caller*slice+seq%slice)%req.Pool)
			return b.store.GuaranteedUpdate(ctx, key, out, false, nil,
				func(input kruntime.Object, _ storage.ResponseMeta) (kruntime.Object, *uint64, error) {
					pod, ok := input.(*v1.Pod)
					if !ok {
						return nil, nil, fmt.Errorf("not a Pod: %T", input)
					}
					bumpCounter(pod)
					return pod, nil, nil
				}, nil)
		default:
			return fmt.Errorf("unknown crud %q", req.Crud)
		}
	}
	return drive(req.Callers, req.Seconds, func(caller, seq int) (uint64, uint64, error) {
		return 0, 0, call(caller, seq)
	})
}

// bumpCounter adds one to the Pod's counter annotation.
func bumpCounter(pod *v1.Pod) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	n, _ := strconv.Atoi(pod.Annotations[counterAnnotation])
	pod.Annotations[counterAnnotation] = strconv.Itoa(n + 1)
}

// list runs one timed run of whole lists, each paged through to its end as kube's
// store benchmarks page: the first call at the request's resourceVersion, the rest
// with the continue token alone.
func (b *bench) list(ctx context.Context, req request) (response, error) {
	if req.Callers <= 0 || len(req.Keys) == 0 {
		return response{}, fmt.Errorf("list needs callers and keys")
	}
	store := b.store
	if req.Cache {
		var err error
		if store, err = b.cacheStore(); err != nil {
			return response{}, err
		}
	}
	one := func(caller, seq int) (uint64, uint64, error) {
		field := fields.Everything()
		if len(req.NodeNames) > 0 {
			field = fields.OneTermEqualSelector("spec.nodeName", req.NodeNames[pick(caller, seq, len(req.NodeNames))])
		}
		key := req.Keys[pick(caller, seq, len(req.Keys))]
		opts := storage.ListOptions{
			Recursive:            true,
			ResourceVersion:      req.ResourceVersion,
			ResourceVersionMatch: metav1Match(req.ResourceVersionMatch),
			Predicate: storage.SelectionPredicate{
				Label:    labels.Everything(),
				Field:    field,
				GetAttrs: podAttrs,
				Limit:    req.Limit,
			},
		}
		var objects, calls uint64
		for {
			out := &v1.PodList{}
			if err := store.GetList(ctx, key, opts, out); err != nil {
				return objects, calls, err
			}
			calls++
			objects += uint64(len(out.Items))
			if out.Continue == "" {
				return objects, calls, nil
			}
			opts.Predicate.Continue = out.Continue
			opts.ResourceVersion = ""
			opts.ResourceVersionMatch = ""
		}
	}
	before, err := consistentReadsFromCache()
	if err != nil {
		return response{}, err
	}
	resp, err := drive(req.Callers, req.Seconds, one)
	if err != nil {
		return resp, err
	}
	after, err := consistentReadsFromCache()
	if err != nil {
		return response{}, err
	}
	resp.ConsistentFromCache = after - before
	return resp, nil
}

// decode times the storage codec's decode of every value under an etcd prefix into a
// typed v1.Pod, then measures the heap the decoded Pods hold.
func (b *bench) decode(ctx context.Context, req request) (response, error) {
	got, err := b.etcd.Get(ctx, req.EtcdPrefix, clientv3.WithPrefix())
	if err != nil {
		return response{}, fmt.Errorf("range %s: %w", req.EtcdPrefix, err)
	}
	values := make([][]byte, 0, len(got.Kvs))
	for _, kv := range got.Kvs {
		values = append(values, kv.Value)
	}
	if len(values) == 0 {
		return response{}, fmt.Errorf("nothing stored under %s", req.EtcdPrefix)
	}
	// The CPU the loop used besides its wall time: the garbage collector works on the
	// other cores while the loop runs, so its share of a decode's cost shows here and
	// not in the wall time (apistore frees each object on the decoding thread).
	cpuBefore := processCPU()
	started := time.Now()
	for _, value := range values {
		pod := &v1.Pod{}
		if _, _, err := b.codec.Decode(value, nil, pod); err != nil {
			return response{}, fmt.Errorf("decode: %w", err)
		}
	}
	perObject := time.Since(started).Seconds() / float64(len(values))
	cpu := processCPU() - cpuBefore

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	held := make([]*v1.Pod, len(values))
	for i, value := range values {
		pod := &v1.Pod{}
		if _, _, err := b.codec.Decode(value, nil, pod); err != nil {
			return response{}, fmt.Errorf("decode: %w", err)
		}
		held[i] = pod
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	bytes := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(len(values))
	runtime.KeepAlive(held)
	return response{Ops: uint64(len(values)), DecodeSeconds: perObject, CPUSeconds: cpu, BytesPerObject: bytes}, nil
}

// drive runs call from `callers` goroutines back to back until `seconds` have passed
// (each caller at least once), timing every call; call returns the objects and the
// GetList calls it saw, for lists.
func drive(callers int, seconds float64, call func(caller, seq int) (uint64, uint64, error)) (response, error) {
	deadline := time.Duration(seconds * float64(time.Second))
	var (
		mu        sync.Mutex
		latencies []float64
		objects   uint64
		calls     uint64
		firstErr  error
		wg        sync.WaitGroup
	)
	cpuBefore := processCPU()
	started := time.Now()
	for caller := 0; caller < callers; caller++ {
		wg.Add(1)
		go func(caller int) {
			defer wg.Done()
			var mine []float64
			var myObjects, myCalls uint64
			var err error
			for seq := 0; seq == 0 || time.Since(started) < deadline; seq++ {
				callStarted := time.Now()
				var o, c uint64
				o, c, err = call(caller, seq)
				if err != nil {
					break
				}
				mine = append(mine, time.Since(callStarted).Seconds())
				myObjects += o
				myCalls += c
			}
			mu.Lock()
			defer mu.Unlock()
			latencies = append(latencies, mine...)
			objects += myObjects
			calls += myCalls
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}(caller)
	}
	wg.Wait()
	elapsed := time.Since(started).Seconds()
	cpu := processCPU() - cpuBefore
	if firstErr != nil {
		return response{}, firstErr
	}
	sort.Float64s(latencies)
	return response{
		Ops:        uint64(len(latencies)),
		Seconds:    elapsed,
		Latencies:  latencies,
		CPUSeconds: cpu,
		Objects:    objects,
		Calls:      calls,
	}, nil
}

// processCPU is this process's user plus system CPU time, in seconds.
func processCPU() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
}
