package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	cachermetrics "k8s.io/apiserver/pkg/storage/cacher/metrics"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

func init() {
	// kube-apiserver registers the cacher's metrics at start; unregistered, kube's
	// counters record nothing.
	cachermetrics.Register()
}

// latencyAnnotation carries a write's wall-clock time in Unix nanoseconds, so that a
// watcher can tell how long the write took to reach it (kube's WatchLatencyTracker).
const latencyAnnotation = "watch-latency-timestamp"

// watchDeadline bounds how long a watcher may take to see every write of a run.
const watchDeadline = 120 * time.Second

// cacher is kube's watch cache for Pods over the bench's etcd3 store, composed as the
// registry's StorageWithCacher composes it, and what the open watchers are doing.
type cacher struct {
	// store is the cacher's own etcd3 store: kube-apiserver builds one per cacher
	// (a store's size estimation serves one cacher), as the registry does.
	store     storage.Interface
	destroy   func()
	cacher    *cacherstorage.Cacher
	delegator *cacherstorage.CacheDelegator
	watchers  *watchRun
}

// startCache builds the cacher over the etcd3 store, waits until it holds the
// revision the request names, and reports the heap the cache holds per cached Pod
// (heap in use after a GC, before and after, as the decode op counts it).
func (b *bench) startCache(ctx context.Context, req request) (response, error) {
	b.stopCache()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	started := time.Now()
	store, destroy, err := newPodStore(b.config)
	if err != nil {
		return response{}, err
	}
	c, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
		Storage:             store,
		Versioner:           storage.APIObjectVersioner{},
		GroupResource:       schema.GroupResource{Resource: "pods"},
		EventsHistoryWindow: storagebackend.DefaultEventsHistoryWindow,
		ResourcePrefix:      "/pods",
		KeyFunc:             func(obj kruntime.Object) (string, error) { return storage.NamespaceKeyFunc("/pods/", obj) },
		NewFunc:             func() kruntime.Object { return &v1.Pod{} },
		NewListFunc:         func() kruntime.Object { return &v1.PodList{} },
		GetAttrsFunc:        podAttrs,
		// The Pod registry's trigger and index: watchers and lists by node.
		IndexerFuncs: storage.IndexerFuncs{"spec.nodeName": nodeNameTrigger},
		Indexers:     &cache.Indexers{"f:spec.nodeName": nodeNameIndex},
		Codec:        b.codec,
	})
	if err != nil {
		destroy()
		return response{}, fmt.Errorf("cacher: %w", err)
	}
	b.cache = &cacher{store: store, destroy: destroy, cacher: c, delegator: cacherstorage.NewCacheDelegator(c, store)}
	// Until its first fill the cacher refuses lists (it does not block them), so wait
	// for it; then a list at the fill's revision returns once the cache holds it.
	for deadline := time.Now().Add(watchDeadline); !c.Ready(); {
		if time.Now().After(deadline) {
			return response{}, fmt.Errorf("the cacher was not ready in %v", watchDeadline)
		}
		time.Sleep(5 * time.Millisecond)
	}
	list := &v1.PodList{}
	opts := storage.ListOptions{
		Recursive:            true,
		ResourceVersion:      req.ResourceVersion,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		Predicate:            storage.Everything,
	}
	opts.Predicate.GetAttrs = podAttrs
	if err := b.cache.delegator.GetList(ctx, "/pods", opts, list); err != nil {
		return response{}, fmt.Errorf("wait for the cache: %w", err)
	}
	filled := time.Since(started).Seconds()
	cached := len(list.Items)
	list = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(max(cached, 1))
	return response{Ops: uint64(cached), Seconds: filled, BytesPerObject: held}, nil
}

// stopCache stops the cacher, if one runs, and its watchers.
func (b *bench) stopCache() {
	if b.cache == nil {
		return
	}
	if w := b.cache.watchers; w != nil {
		w.stop()
	}
	b.cache.delegator.Stop()
	b.cache.cacher.Stop()
	b.cache.destroy()
	b.cache = nil
}

// consistentReadsFromCache reads kube's own count of consistent lists its cachers
// served without falling back to etcd (the delegator records every consistent read
// it sends to the cache in apiserver_watch_cache_consistent_read_total).
func consistentReadsFromCache() (uint64, error) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0, fmt.Errorf("gather metrics: %w", err)
	}
	var served float64
	for _, family := range families {
		if family.GetName() != "apiserver_watch_cache_consistent_read_total" {
			continue
		}
		for _, metric := range family.GetMetric() {
			labels := map[string]string{}
			for _, pair := range metric.GetLabel() {
				labels[pair.GetName()] = pair.GetValue()
			}
			if labels["success"] == "true" && labels["fallback"] == "false" {
				served += metric.GetCounter().GetValue()
			}
		}
	}
	return uint64(served), nil
}

// cacheStore is the cacher as kube-apiserver's registry uses it (the delegator).
func (b *bench) cacheStore() (storage.Interface, error) {
	if b.cache == nil {
		return nil, fmt.Errorf("no cache: send cacheStart first")
	}
	return b.cache.delegator, nil
}

func nodeNameTrigger(obj kruntime.Object) string {
	if pod, ok := obj.(*v1.Pod); ok {
		return pod.Spec.NodeName
	}
	return ""
}

func nodeNameIndex(obj interface{}) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, fmt.Errorf("not a Pod: %T", obj)
	}
	return []string{pod.Spec.NodeName}, nil
}

// watchRun is the watchers of one cacheWatch request: each counts Added events
// until it has seen `count`, and records how long after the run's start that was.
type watchRun struct {
	started  time.Time
	wg       sync.WaitGroup
	mu       sync.Mutex
	finished []float64
	watches  []watch.Interface
	// received counts every watcher's Added events, finished or not.
	received atomic.Uint64
	cpu      float64
	// delays, when the request asked for them, is every Added event's time from its
	// write (the Pod's latencyAnnotation) to its watcher, over all watchers.
	delays []float64
}

func (w *watchRun) stop() {
	for _, one := range w.watches {
		one.Stop()
	}
	w.wg.Wait()
}

// cacheWatch opens the request's watchers of one key through the cache, starts them
// reading, and answers at once: the harness then writes, and cacheWatchWait collects.
func (b *bench) cacheWatch(ctx context.Context, req request) (response, error) {
	store, err := b.cacheStore()
	if err != nil {
		return response{}, err
	}
	if len(req.Keys) != 1 || req.Watchers <= 0 || req.Count == 0 {
		return response{}, fmt.Errorf("cacheWatch needs one key, watchers and a count")
	}
	run := &watchRun{}
	for i := 0; i < req.Watchers; i++ {
		opts := storage.ListOptions{
			Recursive:       true,
			ResourceVersion: req.ResourceVersion,
			Predicate:       storage.Everything,
		}
		opts.Predicate.GetAttrs = podAttrs
		w, err := store.Watch(ctx, req.Keys[0], opts)
		if err != nil {
			run.stop()
			return response{}, fmt.Errorf("watch %s: %w", req.Keys[0], err)
		}
		run.watches = append(run.watches, w)
	}
	run.cpu = processCPU()
	run.started = time.Now()
	for _, w := range run.watches {
		run.wg.Add(1)
		go func(events <-chan watch.Event) {
			defer run.wg.Done()
			var seen uint64
			var delays []float64
			if req.Delays {
				delays = make([]float64, 0, req.Count)
			}
			defer func() {
				run.received.Add(seen)
				if req.Delays {
					run.mu.Lock()
					run.delays = append(run.delays, delays...)
					run.mu.Unlock()
				}
			}()
			for event := range events {
				if event.Type == watch.Error {
					klog.ErrorS(nil, "a cache watcher ended", "status", event.Object)
				}
				if event.Type == watch.Added {
					if req.Delays {
						// Through the metadata: the cacher wraps the Pod it hands
						// to many watchers (as writeThroughput's tracker reads it).
						if pod, err := meta.Accessor(event.Object); err == nil {
							if stamp, err := strconv.ParseInt(pod.GetAnnotations()[latencyAnnotation], 10, 64); err == nil {
								delays = append(delays, time.Since(time.Unix(0, stamp)).Seconds())
							}
						}
					}
					seen++
					if seen == req.Count {
						elapsed := time.Since(run.started).Seconds()
						run.mu.Lock()
						run.finished = append(run.finished, elapsed)
						run.mu.Unlock()
						return
					}
				}
			}
		}(w.ResultChan())
	}
	b.cache.watchers = run
	return response{Ops: uint64(req.Watchers)}, nil
}

// cacheWatchWait waits until every watcher of the last cacheWatch has seen its count
// (or the deadline passed), stops them, and answers with each finished watcher's time
// from the start to its last event, sorted; Ops is how many finished, Objects how many
// Added events all of them received (a terminated watcher's too); with delays asked
// for, how many were measured and their median and p99.
func (b *bench) cacheWatchWait(_ context.Context, _ request) (response, error) {
	if b.cache == nil || b.cache.watchers == nil {
		return response{}, fmt.Errorf("no watchers: send cacheWatch first")
	}
	run := b.cache.watchers
	b.cache.watchers = nil
	done := make(chan struct{})
	go func() { run.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(watchDeadline):
	}
	cpu := processCPU() - run.cpu
	run.stop()
	run.mu.Lock()
	defer run.mu.Unlock()
	sort.Float64s(run.finished)
	resp := response{Ops: uint64(len(run.finished)), Latencies: run.finished, CPUSeconds: cpu, Objects: run.received.Load()}
	if len(run.delays) > 0 {
		sort.Float64s(run.delays)
		resp.Delays = uint64(len(run.delays))
		resp.DelayP50 = run.delays[len(run.delays)/2]
		// kube's tracker's p99: the element at len*99/100 - 1.
		resp.DelayP99 = run.delays[max(len(run.delays)*99/100-1, 0)]
	}
	return resp, nil
}

// watchListEveryPod is kube's WatchList background load (startBackgroundWatchListers,
// one of them): over and over, a watch of every Pod with sendInitialEvents and
// bookmarks and no resourceVersion (the cacher first waits until it holds etcd's
// current revision), read until the bookmark that ends the initial events, then
// stopped. Each such watch counts as a list call and its initial events as listed
// objects, also one the cacher ended before that bookmark (as kube counts it; `cut`
// counts those apart); one still under way when ctx ends is not counted, as kube's
// is not.
func watchListEveryPod(ctx context.Context, store storage.Interface, listCalls, listObjects, cut *atomic.Uint64) {
	sendInitialEvents := true
	opts := storage.ListOptions{Recursive: true, Predicate: storage.Everything, SendInitialEvents: &sendInitialEvents}
	opts.Predicate.AllowWatchBookmarks = true
	for ctx.Err() == nil {
		w, err := store.Watch(ctx, "/pods", opts)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		var objects uint64
		ended, closed := false, false
		for !ended {
			select {
			case <-ctx.Done():
				w.Stop()
				return
			case event, ok := <-w.ResultChan():
				if !ok {
					ended, closed = true, true
					break
				}
				if event.Type != watch.Bookmark {
					objects++
					continue
				}
				if pod, err := meta.Accessor(event.Object); err == nil && pod.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					ended = true
				}
			}
		}
		w.Stop()
		if ctx.Err() == nil {
			listCalls.Add(1)
			listObjects.Add(objects)
			if closed {
				cut.Add(1)
			}
		}
	}
}

// writeThroughput is one run of kube's RunBenchmarkWriteThroughput over the cacher:
// `callers` writers (kube's parallelism, 25) go round the Pods the cache holds, each
// write a guaranteed update of an annotation (Patch) or a delete and a create of the
// same Pod (DeleteCreate), while the background load (none, `watchers` watchers of
// every Pod, one lister of every Pod every 10 ms, or one watch-list of every Pod after
// another) reads. Every write carries its time; one more watcher of every Pod
// measures how long each Added or Modified event took to reach it.
func (b *bench) writeThroughput(ctx context.Context, req request) (response, error) {
	store, err := b.cacheStore()
	if err != nil {
		return response{}, err
	}
	list := &v1.PodList{}
	all := storage.ListOptions{Recursive: true, ResourceVersion: "0", Predicate: storage.Everything}
	all.Predicate.GetAttrs = podAttrs
	if err := store.GetList(ctx, "/pods", all, list); err != nil {
		return response{}, fmt.Errorf("list the Pods: %w", err)
	}
	pods := list.Items
	if len(pods) == 0 || req.Callers <= 0 {
		return response{}, fmt.Errorf("writeThroughput needs Pods in the cache and callers")
	}
	key := func(pod *v1.Pod) string { return "/pods/" + pod.Namespace + "/" + pod.Name }

	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	var events atomic.Uint64
	// Watchers whose channel the cacher closed before the run ended (it ends a
	// watcher that falls behind), and whether the latency tracker was one of them.
	var watchersCut atomic.Uint64
	var trackerCut atomic.Bool
	var latencyMu sync.Mutex
	var latencies []float64
	var wg sync.WaitGroup
	defer wg.Wait()
	// Every watcher starts at the listed revision, so that what it counts are the
	// writes' events (kube's start unset and also get the cached Pods as initial
	// events, some of them counted: that part is not ported).
	since := all
	since.ResourceVersion = list.ResourceVersion
	for i := 0; i <= req.Watchers; i++ {
		w, err := store.Watch(watchCtx, "/pods", since)
		if err != nil {
			return response{}, fmt.Errorf("watch: %w", err)
		}
		tracker := i == 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-watchCtx.Done():
					return
				case event, ok := <-w.ResultChan():
					if !ok {
						if watchCtx.Err() == nil {
							watchersCut.Add(1)
							if tracker {
								trackerCut.Store(true)
							}
						}
						return
					}
					if !tracker {
						events.Add(1)
						continue
					}
					if event.Type != watch.Added && event.Type != watch.Modified {
						continue
					}
					// The cacher hands one event to many watchers wrapped in a
					// caching object, not as the *v1.Pod: read it as kube's tracker
					// does, through the object's metadata.
					if pod, err := meta.Accessor(event.Object); err == nil {
						if stamp, err := strconv.ParseInt(pod.GetAnnotations()[latencyAnnotation], 10, 64); err == nil {
							delay := time.Since(time.Unix(0, stamp)).Seconds()
							latencyMu.Lock()
							latencies = append(latencies, delay)
							latencyMu.Unlock()
						}
					}
				}
			}
		}()
	}

	// The newest write's revision, for the listers at ExactRV and NotOlderThan
	// (kube's latestRV; "0" until the first write).
	var latestRV atomic.Pointer[string]
	initialRV := "0"
	latestRV.Store(&initialRV)
	var listCalls, listObjects atomic.Uint64
	var watchListsCut atomic.Uint64
	if req.Lister == "watchList" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchListEveryPod(watchCtx, store, &listCalls, &listObjects, &watchListsCut)
		}()
	} else if req.Lister != "" {
		var match metav1.ResourceVersionMatch
		switch req.Lister {
		case "unset":
		case "exact":
			match = metav1.ResourceVersionMatchExact
		case "notOlderThan":
			match = metav1.ResourceVersionMatchNotOlderThan
		default:
			return response{}, fmt.Errorf("unknown lister %q", req.Lister)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ticker := time.NewTicker(10 * time.Millisecond)
			defer ticker.Stop()
			for {
				select {
				case <-watchCtx.Done():
					return
				case <-ticker.C:
				}
				opts := storage.ListOptions{Recursive: true, ResourceVersionMatch: match, Predicate: storage.Everything}
				if match != "" {
					rv := *latestRV.Load()
					if rv == "0" || rv == "" {
						continue
					}
					opts.ResourceVersion = rv
				}
				// The list itself runs to its end (a cancelled one makes the etcd
				// client log a warning); one that ends after the run is not counted.
				out := &v1.PodList{}
				if err := store.GetList(ctx, "/pods", opts, out); err == nil && watchCtx.Err() == nil {
					listCalls.Add(1)
					listObjects.Add(uint64(len(out.Items)))
				}
			}
		}()
	}

	var index atomic.Uint64
	stamp := func(pod *v1.Pod) {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[latencyAnnotation] = strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	write := func(_, _ int) (uint64, uint64, error) {
		i := int(index.Add(1)) % len(pods)
		var writes uint64
		switch req.Traffic {
		case "patch":
			out := &v1.Pod{}
			err := store.GuaranteedUpdate(ctx, key(&pods[i]), out, false, nil,
				func(input kruntime.Object, _ storage.ResponseMeta) (kruntime.Object, *uint64, error) {
					pod, ok := input.(*v1.Pod)
					if !ok {
						return nil, nil, fmt.Errorf("not a Pod: %T", input)
					}
					if pod.Annotations == nil {
						pod.Annotations = map[string]string{}
					}
					pod.Annotations["updated-by-benchmark"] = strconv.Itoa(i)
					stamp(pod)
					return pod, nil, nil
				}, nil)
			if err != nil {
				return 0, 0, err
			}
			writes++
			latestRV.Store(&out.ResourceVersion)
		case "deleteCreate":
			err := store.Delete(ctx, key(&pods[i]), &v1.Pod{}, nil, storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{})
			if err == nil {
				writes++
			} else if !storage.IsNotFound(err) {
				return 0, 0, err
			}
			pod := pods[i].DeepCopy()
			pod.ResourceVersion = ""
			stamp(pod)
			out := &v1.Pod{}
			err = store.Create(ctx, key(pod), pod, out, 0)
			if err == nil {
				writes++
				latestRV.Store(&out.ResourceVersion)
			} else if !storage.IsExist(err) {
				return 0, 0, err
			}
		default:
			return 0, 0, fmt.Errorf("unknown traffic %q", req.Traffic)
		}
		return writes, 0, nil
	}
	resp, err := drive(req.Callers, req.Seconds, write)
	if err != nil {
		return response{}, err
	}
	// The events of the last writes are still on their way: give them a moment, as
	// kube's benchmark reads its counters after a consistent list.
	time.Sleep(100 * time.Millisecond)
	stopWatching()
	wg.Wait()
	latencyMu.Lock()
	sort.Float64s(latencies)
	resp.Latencies = latencies
	latencyMu.Unlock()
	// Objects: the writes; Calls: the background watchers' events.
	resp.Calls = events.Load()
	resp.ListCalls = listCalls.Load()
	resp.ListObjects = listObjects.Load()
	resp.WatchListsCut = watchListsCut.Load()
	resp.WatchersCut = watchersCut.Load()
	resp.TrackerCut = trackerCut.Load()
	return resp, nil
}
