// Stands in for k8s.io/kube-proxy, which the Go module proxy lacks at some pinned version
// and kube-apiserver never imports.
module k8s.io/kube-proxy

go 1.22
