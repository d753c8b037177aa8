// Package manifests holds no code: its test decodes deploy/kubernetes/
// (the kustomization, the driver's objects and the examples) strictly
// into the Kubernetes API's Go types, so that a misspelt or misplaced
// field, or a value of the wrong type, fails here and not on a cluster.
package manifests
