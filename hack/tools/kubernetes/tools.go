//go:build tools

// Package tools pins the Kubernetes release whose binaries the tests run, so that
// `go build k8s.io/kubernetes/cmd/<name>` in this module builds that release: kube-apiserver and kubectl for the
// envtest-style tiers; kubelet, kube-scheduler, kube-controller-manager and kube-proxy for `make e2e`, which runs a
// real single-node cluster.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
