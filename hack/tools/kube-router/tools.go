//go:build tools

// Package tools pins the kube-router release whose network policy controller `make e2e` runs next to the bridge CNI
// plugin (which enforces no NetworkPolicy itself), so that `go build github.com/cloudnativelabs/kube-router/v2/cmd/kube-router`
// in this module builds that release with the dependencies its go.sum pins.
package tools

import (
	_ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
)
