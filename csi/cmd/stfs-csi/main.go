// stfs-csi: stfs's CSI node plugin, and (`stfs-csi daemon`) the
// unprivileged launcher of its stfs daemons.  docs/kubernetes.md.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"stfs/csi/internal/driver"
	"stfs/csi/internal/launch"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "0.2.0"

func usage() {
	fmt.Fprintf(os.Stderr, `usage: stfs-csi --endpoint unix:///PATH/csi.sock --node-id NAME [options]
       stfs-csi daemon --socket PATH [--stfs PATH] [--user UID:GID]

The plugin (root): Identity and Node services on the endpoint; it opens and
mounts /dev/fuse and hands each mount to the launcher.  The launcher
(stfs-csi daemon): runs as a non-root user with no capability and starts
one stfs daemon per mount.  See docs/kubernetes.md.

plugin options:
`)
}

// serveMetrics serves the driver's registry on addr/metrics.
func serveMetrics(drv *driver.Driver, addr, dir string) error {
	set, err := drv.EnableMetrics(dir)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", set.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, MaxHeaderBytes: 16 << 10}
	go func() {
		log.Fatalf("stfs-csi: metrics on %s: %v", l.Addr(), srv.Serve(l))
	}()
	log.Printf("stfs-csi: metrics on http://%s/metrics, the daemons' files in %s", l.Addr(), dir)
	return nil
}

func userOf(s string) (int, int, error) {
	u, g, ok := strings.Cut(s, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("--user %q: give UID:GID", s)
	}
	return uid, gid, nil
}

func daemonMain(args []string) {
	fs := flag.NewFlagSet("daemon", flag.ExitOnError)
	socket := fs.String("socket", "/run/stfs-csi/launcher.sock", "where the plugin connects")
	stfs := fs.String("stfs", "/usr/bin/stfs", "the stfs program")
	user := fs.String("user", "65534:65534", "UID:GID to become when started as root")
	fs.Parse(args)
	uid, gid, err := userOf(*user)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(launch.Serve(launch.Config{Socket: *socket, Stfs: *stfs, UID: uid, GID: gid}))
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if len(os.Args) > 1 && os.Args[1] == "daemon" {
		daemonMain(os.Args[2:])
		return
	}
	flag.Usage = func() { usage(); flag.PrintDefaults() }
	var cfg driver.Config
	var user string
	showVersion := flag.Bool("version", false, "print the version")
	flag.StringVar(&cfg.Endpoint, "endpoint", "unix:///csi/csi.sock", "the CSI endpoint")
	flag.StringVar(&cfg.NodeID, "node-id", "", "this node's name (required)")
	flag.StringVar(&cfg.Launcher, "launcher", "/run/stfs-csi/launcher.sock", "the launcher's socket (stfs-csi daemon --socket)")
	flag.StringVar(&cfg.StateDir, "state-dir", "/run/stfs-csi", "where the daemons' mounts are made")
	flag.StringVar(&cfg.CacheDir, "cache-dir", "/var/cache/stfs-csi", "the node's cache, shared by every daemon")
	flag.StringVar(&cfg.LocalDir, "local-dir", "", "a folder on the node whose models volumes may name as a path (default: none; never one holding the cache)")
	flag.StringVar(&cfg.CacheSize, "cache-size", "", "cache_size= of each daemon (default: stfs's)")
	flag.StringVar(&user, "daemon-user", "65534:65534", "UID:GID the daemons run as (owner of the cache and the mounts' files)")
	flag.DurationVar(&cfg.Grace, "grace", 5*time.Minute, "how long a daemon with no pod left stays mounted")
	flag.DurationVar(&cfg.CheckInterval, "check-interval", 2*time.Second, "how often each mount is checked for a dead daemon")
	flag.DurationVar(&cfg.StartTimeout, "start-timeout", 5*time.Minute, "how long a daemon may take to open its source")
	flag.IntVar(&cfg.ReadaheadKB, "readahead-kb", 4096, "readahead of each mount in KiB (a volume's readahead= overrides)")
	allow := flag.String("allow-hosts", "*", "comma-separated hosts an http(s):// source may name: * (any public host), NAME, .DOMAIN (its subdomains), ADDRESS or CIDR (that range, even loopback, link-local or private); a host that is or resolves to a non-public address is refused unless an ADDRESS or CIDR covers it")
	flag.IntVar(&cfg.MaxDaemons, "max-daemons", 64, "at most so many stfs daemons on the node (0: no limit); beyond, a publish needing a new one is ResourceExhausted")
	flag.IntVar(&cfg.Limits.Threads, "max-threads", 16, "the most threads= a volume may ask (0: stfs's 256)")
	flag.IntVar(&cfg.Limits.Connections, "max-connections", 16, "the most connections= a volume may ask (0: stfs's 256)")
	metricsAddr := flag.String("metrics-address", "", "serve Prometheus metrics (the plugin's and its daemons') on HOST:PORT/metrics (default: off; docs/kubernetes.md suggests :9818)")
	kf := addKubeletFlags()
	metricsDir := flag.String("metrics-dir", "", "where the daemons write their metrics files (default: the --launcher socket's folder's metrics/, which the daemons see at the same path)")
	flag.Parse()
	if *showVersion {
		fmt.Println("stfs-csi", version)
		return
	}
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	var err error
	if cfg.DaemonUID, cfg.DaemonGID, err = userOf(user); err != nil {
		log.Fatal(err)
	}
	cfg.Version = version
	if cfg.Policy, err = driver.ParsePolicy(*allow); err != nil {
		log.Fatalf("stfs-csi: %v", err)
	}
	if cfg.MaxDaemons < 0 || cfg.Limits.Threads < 0 || cfg.Limits.Connections < 0 {
		log.Fatalf("stfs-csi: --max-daemons, --max-threads and --max-connections are 0 or more")
	}
	drv, err := driver.New(cfg)
	if err != nil {
		log.Fatalf("stfs-csi: %v", err)
	}
	if *metricsAddr != "" {
		dir := *metricsDir
		if dir == "" {
			dir = filepath.Join(filepath.Dir(cfg.Launcher), "metrics")
		}
		if err := serveMetrics(drv, *metricsAddr, dir); err != nil {
			log.Fatalf("stfs-csi: --metrics-address %s: %v", *metricsAddr, err)
		}
	}
	// the daemons of a previous run (an upgrade): their pods read on
	if n, err := drv.Adopt(); err != nil {
		log.Printf("stfs-csi: adopting the daemons of a previous run: %v", err)
	} else if n > 0 {
		log.Printf("stfs-csi: adopted %d daemons of a previous run", n)
	}
	drv.PruneMetrics()
	l, err := driver.Listen(cfg.Endpoint)
	if err != nil {
		log.Fatalf("stfs-csi: %v", err)
	}
	stopKubelet := kf.start(l.Addr().String())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		// the mounts and daemons stay: pods keep reading through a
		// driver upgrade; the calls under way end first
		drv.Stop(10 * time.Second)
	}()
	log.Printf("stfs-csi %s: node %s on %s", version, cfg.NodeID, cfg.Endpoint)
	if err := drv.Serve(l); err != nil {
		log.Fatalf("stfs-csi: %v", err)
	}
	stopKubelet()
	log.Printf("stfs-csi: stopped")
}
