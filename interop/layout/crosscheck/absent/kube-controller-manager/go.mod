// Stands in for k8s.io/kube-controller-manager, which the Go module proxy lacks at some pinned version
// and kube-apiserver never imports.
module k8s.io/kube-controller-manager

go 1.22
