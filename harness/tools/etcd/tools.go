//go:build tools

// Package tools pins the etcd server the local control plane runs on.
package tools

import _ "go.etcd.io/etcd/server/v3"
