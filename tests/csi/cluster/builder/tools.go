//go:build tools

// Package clusterbuild pins the Kubernetes binaries the cluster suite builds
// (tests/csi/cluster/build.sh): go build of these import paths at the versions in go.mod.
package clusterbuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
