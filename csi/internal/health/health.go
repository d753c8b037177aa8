// Package health serves the node plugin's own liveness endpoint
// (/healthz), so that the DaemonSet needs no livenessprobe sidecar: each
// request dials the plugin's CSI socket afresh, as kubelet does, and calls
// Identity.Probe (the plugin answers ready when its launcher answers), and
// asks the plugin's other checks (kubelet's word on the registration).
// docs/kubernetes.md, "Registration and liveness".
package health

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Checker probes the CSI socket at Socket (a path) within Timeout, then
// each of Checks.
type Checker struct {
	Socket  string
	Timeout time.Duration
	Checks  []func() error
}

// Check: nil when the plugin is alive.
func (c *Checker) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	conn, err := grpc.NewClient("unix:"+c.Socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("the CSI socket %s: %w", c.Socket, err)
	}
	defer conn.Close()
	// WaitForReady: a socket that is not there (yet) fails at the
	// deadline with the dial's error, not at once with "unavailable"
	r, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{},
		grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("Probe on %s: %w", c.Socket, err)
	}
	if r.GetReady() != nil && !r.GetReady().GetValue() {
		return errors.New("Probe: the plugin says it is not ready")
	}
	for _, f := range c.Checks {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// ServeHTTP answers /healthz: 200 "ok", else 500 and the reason (logged
// too: the probe's caller, kubelet, does not show the body).
func (c *Checker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := c.Check(r.Context()); err != nil {
		log.Printf("stfs-csi: healthz: %v", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

// Serve answers /healthz on addr (HOST:PORT) until the process ends; the
// listener is returned (its address, when the port was 0).
func Serve(addr string, c *Checker) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", c)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: c.Timeout + 10*time.Second,
		MaxHeaderBytes: 16 << 10}
	go func() {
		if err := srv.Serve(l); !errors.Is(err, net.ErrClosed) {
			log.Fatalf("stfs-csi: healthz on %s: %v", l.Addr(), err)
		}
	}()
	return l, nil
}
