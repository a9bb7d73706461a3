package main

// request is one line from the harness.
//
//	{"op":"crud","crud":"create|get|update","namespace":NS,"poolNamespace":PNS,"namePrefix":P,"pool":N,"callers":C,"seconds":S}
//	{"op":"list","keys":["/pods"],"nodeNames":[...],"limit":L,"resourceVersion":RV,"resourceVersionMatch":M,"callers":C,"seconds":S}
//	{"op":"decode","etcdPrefix":"/registry/pods/"}
//	{"op":"cacheStart","resourceVersion":RV}   kube's cacher over the store, filled up to RV
//	{"op":"list",...,"cache":true}             the list above, from the cacher
//	{"op":"cacheWatch","keys":[KEY],"resourceVersion":RV,"watchers":N,"count":C,"delays":D}
//	{"op":"cacheWatchWait"}                    after the harness wrote C Pods under KEY
//	{"op":"writeThroughput","traffic":"patch|deleteCreate","watchers":W,"lister":"|unset|exact|notOlderThan|watchList","callers":C,"seconds":S}
//	{"op":"cacheStop"}
//	{"op":"quit"}
//
// Keys are storage keys as the registry passes them (`/pods/<namespace>/<name>`); the
// store adds the etcd prefix.
type request struct {
	Op   string `json:"op"`
	Crud string `json:"crud"`
	// Namespace is where creates go; the pool is in PoolNamespace.
	Namespace     string `json:"namespace"`
	PoolNamespace string `json:"poolNamespace"`
	// NamePrefix and Pool name the pool's Pods: NamePrefix + the index in five digits.
	NamePrefix string  `json:"namePrefix"`
	Pool       int     `json:"pool"`
	Callers    int     `json:"callers"`
	Seconds    float64 `json:"seconds"`

	// Keys are what the lists list, one per list, rotating over callers and calls.
	Keys                 []string `json:"keys"`
	Limit                int64    `json:"limit"`
	ResourceVersion      string   `json:"resourceVersion"`
	ResourceVersionMatch string   `json:"resourceVersionMatch"`
	// NodeNames, when given, select `spec.nodeName=<one of them>`, rotating as Keys.
	NodeNames []string `json:"nodeNames"`

	EtcdPrefix string `json:"etcdPrefix"`

	// Cache sends a list to the cacher rather than the etcd3 store.
	Cache bool `json:"cache"`
	// Watchers and Count: how many watchers cacheWatch opens and how many Added
	// events each waits for; writeThroughput's background watchers (besides the one
	// measuring latency).
	Watchers int    `json:"watchers"`
	Count    uint64 `json:"count"`
	// Delays asks cacheWatch's watchers to measure each Added event's time from its
	// write, which the Pod carries in its watch-latency-timestamp annotation.
	Delays bool `json:"delays"`
	// Traffic is writeThroughput's kind of write: kube's Patch or DeleteCreate.
	Traffic string `json:"traffic"`
	// Lister is writeThroughput's list background load (kube's Lister,
	// ListerExactRV, ListerNotOlderThan): one lister of every Pod every 10 ms, at
	// no resourceVersion ("unset"), or at the newest write's revision matched
	// exactly ("exact") or as a floor ("notOlderThan"); or kube's WatchList, one
	// watch with sendInitialEvents after another, each read to the end of its
	// initial events ("watchList"); "" for none.
	Lister string `json:"lister"`
}

// response is one line back: what one timed run measured.
type response struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Ops are the completed calls (a paged list counts once).
	Ops uint64 `json:"ops"`
	// Seconds from the first call's start to the last call's end.
	Seconds float64 `json:"seconds"`
	// Latencies is every call's latency in seconds, sorted; for cacheWatchWait, each
	// finished watcher's time to its last event; for writeThroughput, each write's
	// time to reach the latency watcher.
	Latencies []float64 `json:"latencies,omitempty"`
	// CPUSeconds is this process's user and system CPU time during the run (for
	// decode, during the timed loop of decodes).
	CPUSeconds float64 `json:"cpuSeconds"`
	// Objects and Calls are the items returned and the GetList calls made (lists);
	// for writeThroughput, the writes and the background watchers' events; Objects
	// for cacheWatchWait, the Added events all watchers received.
	Objects uint64 `json:"objects"`
	Calls   uint64 `json:"calls"`
	// DecodeSeconds and BytesPerObject are per decoded value (decode); for
	// cacheStart, BytesPerObject is the heap the cache holds per cached Pod.
	DecodeSeconds  float64 `json:"decodeSeconds"`
	BytesPerObject float64 `json:"bytesPerObject"`
	// ListCalls and ListObjects are writeThroughput's background lister's
	// successful lists and the items they returned (for "watchList", the watches
	// read to the end of their initial events or ended early by the cacher, and
	// the initial events they brought).
	ListCalls   uint64 `json:"listCalls"`
	ListObjects uint64 `json:"listObjects"`
	// ConsistentFromCache is how many consistent lists (no resourceVersion) the
	// cacher served itself during a list run, without falling back to etcd: what
	// kube-apiserver counts in apiserver_watch_cache_consistent_read_total with
	// success="true" and fallback="false".
	ConsistentFromCache uint64 `json:"consistentFromCache"`
	// WatchListsCut: of writeThroughput's watch-lists (ListCalls), those the cacher
	// ended before the bookmark that ends their initial events.
	WatchListsCut uint64 `json:"watchListsCut"`
	// WatchersCut: writeThroughput's watchers (the background ones and the latency
	// tracker) whose channel the cacher closed before the run ended; TrackerCut:
	// whether the latency tracker was one of them.
	WatchersCut uint64 `json:"watchersCut"`
	TrackerCut  bool   `json:"trackerCut"`
	// Delays, DelayP50 and DelayP99: for cacheWatchWait after a cacheWatch with
	// delays, how many Added events carried a write time, and the median and p99
	// (kube's tracker's element) of their times from write to watcher, in seconds.
	Delays   uint64  `json:"delays"`
	DelayP50 float64 `json:"delayP50"`
	DelayP99 float64 `json:"delayP99"`
}

func failure(err error) response {
	return response{OK: false, Error: err.Error()}
}
