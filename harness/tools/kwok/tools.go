//go:build tools

// Package tools pins kwok, the fake-node controller used by the session tests.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
