// The module root for building kube-apiserver. Each kube version has its own modfile
// (go-1.37.mod, go-1.31.mod) and is built with `go build -modfile=go-<minor>.mod`;
// see README.md. This file is never read by those builds.
module apistore/interop/kube-apiserver

go 1.26.0
