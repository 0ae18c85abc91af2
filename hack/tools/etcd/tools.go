//go:build tools

// Package tools pins the etcd server module so `go build go.etcd.io/etcd/server/v3` builds the release's etcd.
package tools

import _ "go.etcd.io/etcd/server/v3"
