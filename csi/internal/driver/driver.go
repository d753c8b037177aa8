// Package driver is stfs's CSI node plugin: Identity and Node services, no
// controller, no call to the Kubernetes API.  docs/kubernetes.md says how
// it is deployed and what each volume attribute means.
package driver

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"stfs/csi/internal/metrics"
)

// Config of the plugin.
type Config struct {
	Endpoint      string // unix:///PATH/csi.sock
	NodeID        string
	Version       string
	Launcher      string        // the launcher's socket
	StateDir      string        // the daemons' mounts: STATE/mounts/KEY
	CacheDir      string        // the node's cache, for every daemon
	CacheSize     string        // cache_size= of every daemon ("": stfs's)
	LocalDir      string        // local sources only under it ("": none)
	DaemonUID     int           // the daemons' user: owns the cache
	DaemonGID     int           //
	Grace         time.Duration // a daemon with no target lives so long
	CheckInterval time.Duration // how often mounts are checked
	StartTimeout  time.Duration // a daemon may take so long to open its source
	ReadaheadKB   int           // of each mount, unless readahead= says
	// Policy: the hosts a volume's http(s):// source may name
	// (--allow-hosts; nil: any public host)
	Policy *Policy
	// MaxDaemons: at most so many daemons on the node (0: no limit)
	MaxDaemons int
	// Limits: the most a volume's threads= and connections= may ask
	Limits Limits
}

// Driver serves both services.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	cfg     Config
	mu      sync.Mutex // the maps
	daemons map[string]*daemon
	targets map[string]published
	stop    chan struct{}
	nodeKey []byte       // keys the daemons' keys (accepted.go)
	metrics *metrics.Set // nil: no --metrics-address (metrics.go)
	sys     system       // the mount and process calls (system.go)
	srvMu   sync.Mutex   // srv, stopped
	srv     *grpc.Server // while Serve runs
	stopped bool         // Stop was called: Serve serves no more
}

// New checks cfg and prepares the node's directories.
func New(cfg Config) (*Driver, error) {
	if cfg.NodeID == "" {
		return nil, fmt.Errorf("--node-id is missing")
	}
	// the daemons' mounts: root's alone.  Each serves its volume to
	// anyone who reaches it (allow_other), and a gated model is only its
	// pods' (through their binds): a user of the node must not walk in
	mounts := filepath.Join(cfg.StateDir, "mounts")
	if err := os.MkdirAll(mounts, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(mounts, 0o700); err != nil {
		return nil, err
	}
	// the cache: the daemons' user's alone (stfs refuses any other)
	if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chown(cfg.CacheDir, cfg.DaemonUID, cfg.DaemonGID); err != nil {
		return nil, err
	}
	if err := os.Chmod(cfg.CacheDir, 0o700); err != nil {
		return nil, err
	}
	if cfg.Policy == nil {
		cfg.Policy, _ = ParsePolicy("")
	}
	nk, err := loadNodeKey(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	pruneAccepted(cfg.StateDir, time.Now())
	return &Driver{cfg: cfg, daemons: map[string]*daemon{}, sys: realSystem{},
		targets: map[string]published{}, stop: make(chan struct{}), nodeKey: nk}, nil
}

// key names v's daemon on this node, under this node's policy: the stfs
// options the policy gives it (public_net, allow_net=) are part of the
// key, so that a daemon started under another policy (by a plugin with
// none, or with another --allow-hosts, adopted after a restart) serves
// only the targets it had, and a new publish starts one under this one.
func (drv *Driver) key(v *Volume) string {
	return v.Key(drv.nodeKey, drv.cfg.Policy.StfsOptions(v.Source)...)
}

// Listen opens the endpoint (unix:///PATH or /PATH).
func Listen(endpoint string) (net.Listener, error) {
	path := endpoint
	if strings.HasPrefix(endpoint, "unix:") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return nil, err
		}
		path = u.Path
		if u.Host != "" {
			path = filepath.Join(u.Host, u.Path)
		}
	} else if strings.Contains(endpoint, "://") {
		return nil, fmt.Errorf("endpoint %s: only unix:// endpoints", endpoint)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	os.Remove(path)
	return net.Listen("unix", path)
}

// Serve runs the gRPC server and the mount checks until Stop (nil) or
// an error of l.
func (drv *Driver) Serve(l net.Listener) error {
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(logCalls, drv.observe))
	csi.RegisterIdentityServer(s, drv)
	csi.RegisterNodeServer(s, drv)
	drv.srvMu.Lock()
	drv.srv = s
	stopped := drv.stopped
	drv.srvMu.Unlock()
	if stopped { // a signal came before Serve
		l.Close()
		return nil
	}
	go func() {
		t := time.NewTicker(drv.cfg.CheckInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				drv.check()
			case <-drv.stop:
				return
			}
		}
	}()
	defer close(drv.stop)
	return s.Serve(l)
}

// Stop ends Serve: no new call is taken, the calls under way finish (a
// publish waiting for its daemon: at most wait), and Serve returns nil.
// The timers stop; mounts and daemons stay (Shutdown).
func (drv *Driver) Stop(wait time.Duration) {
	drv.Shutdown()
	drv.srvMu.Lock()
	s := drv.srv
	drv.stopped = true
	drv.srvMu.Unlock()
	if s == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(wait):
		s.Stop() // the calls still under way are cancelled
		<-done
	}
}

// logCalls logs each call's method and outcome: never its request, which
// may hold secrets.
func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	t := time.Now()
	resp, err := h(ctx, req)
	if err != nil {
		log.Printf("stfs-csi: %s: %v (%v)", info.FullMethod, err, time.Since(t).Round(time.Millisecond))
	}
	return resp, err
}
