//go:build tools

// Package tools pins the etcd server and etcdctl modules so `go build go.etcd.io/etcd/server/v3` and
// `go build go.etcd.io/etcd/etcdctl/v3` build the release's etcd and etcdctl (the e2e etcd image carries both, as
// the official image does: the chart's maintenance CronJobs and the member-add procedure run etcdctl).
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
