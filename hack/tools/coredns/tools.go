//go:build tools

// Package tools pins the CoreDNS release that `make e2e` runs as the cluster DNS of its single-node cluster, so that
// `go build github.com/coredns/coredns` in this module builds that release with the dependencies its go.sum pins.
package tools

import (
	_ "github.com/coredns/coredns"
)
