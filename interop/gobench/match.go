package main

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// metav1Match turns the request's spelling ("", NotOlderThan, Exact) into kube's type.
func metav1Match(match string) metav1.ResourceVersionMatch {
	return metav1.ResourceVersionMatch(match)
}
