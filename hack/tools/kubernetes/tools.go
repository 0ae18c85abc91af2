//go:build tools

// Package tools pins the Kubernetes release whose kube-apiserver and kubectl the tests run, so that
// `go build k8s.io/kubernetes/cmd/kube-apiserver` (and cmd/kubectl) in this module builds that release.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
