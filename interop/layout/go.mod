// The module root of the layout generator. Each kube minor has its own modfile
// (go-1.31.mod .. go-1.37.mod) pinning that minor's k8s.io/api, apimachinery,
// client-go, apiextensions-apiserver and kube-aggregator; run with
// `go run -modfile=go-1.3X.mod .` (see README.md). This file is never read by those runs.
module apistore/interop/layout

go 1.22.0
