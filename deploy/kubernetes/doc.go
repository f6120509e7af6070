// Package kubernetes holds no code: its test checks the manifests beside
// it against the Kubernetes API types and against leasehold itself. It is
// a module of its own so that the server's module takes no Kubernetes
// dependency.
package kubernetes
