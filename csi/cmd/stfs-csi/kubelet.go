// kubelet.go: what stands in for the node-driver-registrar and
// livenessprobe sidecars: answering kubelet's plugin registration
// (internal/registration) and serving /healthz (internal/health).
// docs/kubernetes.md, "Registration and liveness".
package main

import (
	"flag"
	"log"
	"time"

	"stfs/csi/internal/driver"
	"stfs/csi/internal/health"
	"stfs/csi/internal/registration"
)

type kubeletFlags struct {
	regDir        string
	regPath       string
	healthAddr    string
	healthTimeout time.Duration
}

func addKubeletFlags() *kubeletFlags {
	k := &kubeletFlags{}
	flag.StringVar(&k.regDir, "registration-dir", "", "kubelet's plugins_registry folder as this container sees it: answer kubelet's plugin registration on DIR/"+driver.Name+"-reg.sock, no registrar sidecar (default: off)")
	flag.StringVar(&k.regPath, "kubelet-registration-path", "/var/lib/kubelet/plugins/"+driver.Name+"/csi.sock", "the --endpoint's socket as kubelet sees it on the node (told to kubelet at registration)")
	flag.StringVar(&k.healthAddr, "health-address", "", "serve /healthz on HOST:PORT: 200 when the --endpoint socket answers Probe (the launcher answers) and kubelet has not refused the registration, else 500 and why (default: off; node.yaml uses :9808)")
	flag.DurationVar(&k.healthTimeout, "health-timeout", 5*time.Second, "how long /healthz waits for Probe")
	return k
}

// start registers with kubelet and serves /healthz as the flags say;
// socket: the CSI endpoint's path, listening already.  The returned
// function removes the registration socket.
func (k *kubeletFlags) start(socket string) func() {
	var reg *registration.Server
	chk := &health.Checker{Socket: socket, Timeout: k.healthTimeout}
	if k.regDir != "" {
		var err error
		reg, err = registration.Start(registration.Config{Dir: k.regDir,
			Name: driver.Name, Endpoint: k.regPath, Versions: []string{"1.0.0"}})
		if err != nil {
			log.Fatalf("stfs-csi: --registration-dir %s: %v", k.regDir, err)
		}
		chk.Checks = append(chk.Checks, reg.Status)
		log.Printf("stfs-csi: kubelet's registration on %s (kubelet reaches the plugin at %s)", reg.Path(), k.regPath)
	}
	if k.healthAddr != "" {
		if k.healthTimeout <= 0 {
			log.Fatalf("stfs-csi: --health-timeout must be positive")
		}
		l, err := health.Serve(k.healthAddr, chk)
		if err != nil {
			log.Fatalf("stfs-csi: --health-address %s: %v", k.healthAddr, err)
		}
		log.Printf("stfs-csi: liveness on http://%s/healthz", l.Addr())
	}
	return func() {
		if reg != nil {
			reg.Stop()
		}
	}
}
