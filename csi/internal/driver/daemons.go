// daemons.go: the node's stfs daemons, one per (source, options,
// credentials), each mounted once under the state directory and bound
// read-only onto every target that publishes it.  The last unpublish
// unmounts it after the grace time; a daemon that dies (its launcher
// connection ends, or its mount answers ENOTCONN) is mounted again with
// the credentials it was last given, and every target bound again.
package driver

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"stfs/csi/internal/launch"
)

type daemon struct {
	key string
	vol *Volume // with the credentials: memory only
	dir string  // where its FUSE mount is
	// adopted after a restart of the plugin without the credentials it
	// was started with: not mounted again until a publish brings them
	needsSecrets bool

	mu      sync.Mutex // all below; never taken while holding Driver.mu
	removed bool       // stopped and out of the map: look it up again
	live    bool
	gen     int // counts starts; an old watcher's news is stale
	// a start under way: closed when it has ended (live, or startErr)
	starting chan struct{}
	startErr error
	conn     daemonConn      // to the launcher, for this start
	pid      int             // the stfs process
	targets  map[string]bool // where it is bound
	grace    *time.Timer
	retry    *time.Timer
	// publishes waiting for a start to end: no grace time while any
	// does (a grace of 0 would stop the daemon before they bind it)
	waiters int
}

// errStarting: the daemon did not come up; the message says why (stfs's
// own words), its exit status of what class the failure is (class.go; 0:
// it did not exit).
type errStarting struct {
	msg    string
	status int
}

func (e *errStarting) Error() string { return e.msg }

// get finds or makes the daemon for v (not started).  A new one beyond
// --max-daemons first stops a daemon in its grace time (no pod left); if
// there is none, the answer is ResourceExhausted.
func (drv *Driver) get(v *Volume) (*daemon, error) {
	key := drv.key(v)
	for {
		drv.mu.Lock()
		d := drv.daemons[key]
		max := drv.cfg.MaxDaemons
		if d == nil && (max <= 0 || len(drv.daemons) < max) {
			d = &daemon{key: key, vol: v, dir: filepath.Join(drv.cfg.StateDir, "mounts", key),
				targets: map[string]bool{}}
			drv.daemons[key] = d
		}
		if d != nil {
			drv.mu.Unlock()
			return d, nil
		}
		idle := make([]*daemon, 0, len(drv.daemons))
		for _, o := range drv.daemons {
			idle = append(idle, o)
		}
		drv.mu.Unlock()
		if !drv.stopIdle(idle) {
			return nil, status.Errorf(codes.ResourceExhausted,
				"%s: this node runs %d stfs daemons already, each with a pod (the plugin's --max-daemons)", v.Source, max)
		}
	}
}

// stopIdle stops one of ds that has no target and waits out its grace
// time, to make room; false if none does.
func (drv *Driver) stopIdle(ds []*daemon) bool {
	for _, d := range ds {
		d.mu.Lock()
		idle := !d.removed && len(d.targets) == 0 && d.grace != nil && d.starting == nil
		if idle {
			log.Printf("stfs-csi: %s: stopped before its grace time ends, to make room (--max-daemons)", d.key)
			drv.stopLocked(d)
		}
		d.mu.Unlock()
		if idle {
			return true
		}
	}
	return false
}

// Daemons: the number of daemons the driver holds (for tests and logs).
func (drv *Driver) Daemons() int {
	drv.mu.Lock()
	defer drv.mu.Unlock()
	return len(drv.daemons)
}

// start makes a new FUSE mount, detached (swap.go), and has the launcher
// start stfs on it; with d.mu held.  What d.dir holds (a dead daemon's
// mount, in a recovery) stays until the new one serves.  The wait for the
// daemon to serve goes on without the lock (the source may take long to
// open): d.starting is closed when it ends, with d.live set, or
// d.startErr.  A caller's deadline does not stop it: the next publish
// finds it under way, or done.
func (drv *Driver) start(d *daemon) error {
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return err
	}
	fd, mnt, err := drv.sys.newMount("stfs-csi", drv.cfg.DaemonUID, drv.cfg.DaemonGID)
	if err != nil {
		return err
	}
	opts := append([]string{"cache=" + drv.cfg.CacheDir}, d.vol.Options...)
	if drv.cfg.CacheSize != "" {
		opts = append(opts, "cache_size="+drv.cfg.CacheSize)
	}
	// every connection of a URL the volume named is checked by stfs
	// itself, on the address it goes to (redirects, DNS rebinding)
	opts = append(opts, drv.cfg.Policy.StfsOptions(d.vol.Source)...)
	opts = append(opts, drv.metricsOptions(d.key)...)
	// offline: not one request, but the credentials name what of the
	// node cache it may read (stfs keeps what a credential fetched in
	// its own trust domain: docs/remote-cache.md, "Trust domains")
	env := d.vol.Secrets
	if d.vol.Offline {
		opts = append(opts, "offline")
	}
	req := launch.Request{ID: d.key, Source: d.vol.Source, Options: opts, Env: env}
	conn, ev, err := drv.sys.launch(drv.cfg.Launcher, req, fd)
	drv.sys.closeFD(fd)
	if err == nil && !ev.Started {
		conn.Close()
		err = &errStarting{msg: "the launcher: " + ev.Error}
	}
	if err != nil {
		drv.sys.closeFD(mnt) // the new mount goes; its daemon sees ENODEV
		return err
	}
	d.gen++
	d.conn, d.pid = conn, ev.Pid
	d.starting, d.startErr = make(chan struct{}), nil
	exited := make(chan launch.Event, 1)
	go drv.watch(d, d.gen, conn, exited)
	go drv.waitReady(d, d.gen, d.starting, exited, mnt)
	return nil
}

// waitReady waits for the daemon of start gen to serve on the detached
// mount mnt (or to exit, or for --start-timeout), then finishes its start:
// mnt put in place on d.dir and on every target (beneath a dead mount
// there, swap.go), live, the readahead set; or mnt dropped, with the
// reason.
func (drv *Driver) waitReady(d *daemon, gen int, done chan struct{}, exited chan launch.Event, mnt int) {
	defer drv.sys.closeFD(mnt) // once moved, the mount stays without it
	ctx, cancel := context.WithTimeout(context.Background(), drv.cfg.StartTimeout)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- drv.sys.mountReady(ctx, mnt) }()
	var err error
	select {
	case err = <-ready:
		if err != nil { // stfs's own words, when it says why
			select {
			case ev := <-exited:
				if m := strings.TrimSpace(ev.Stderr); m != "" {
					err = &errStarting{m, ev.Status}
				}
			case <-time.After(2 * time.Second):
			}
		}
	case ev := <-exited:
		err = &errStarting{strings.TrimSpace(ev.Stderr), ev.Status}
		if err.Error() == "" {
			err = &errStarting{fmt.Sprintf("stfs exited (%d)", ev.Status), ev.Status}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	defer close(done)
	if d.starting == done {
		d.starting = nil
	}
	if d.removed || d.gen != gen {
		return
	}
	if err == nil {
		err = drv.sys.moveInPlace(mnt, d.dir)
	}
	if err != nil {
		d.gen++ // the watcher's news is now stale
		d.startErr = err
		d.conn.Close()
		log.Printf("stfs-csi: %s: %s did not start: %v", d.key, d.vol.Source, err)
		if len(d.targets) == 0 {
			drv.stopLocked(d)
		} else {
			drv.retryLater(d)
		}
		return
	}
	d.live = true
	if err := writeMeta(d); err != nil {
		log.Printf("stfs-csi: %s: %v", d.key, err)
	}
	if !d.vol.Offline { // the origin accepted these credentials
		if err := markAccepted(drv.cfg.StateDir, d.key, d.vol.Source); err != nil {
			log.Printf("stfs-csi: %s: the marker of accepted credentials: %v", d.key, err)
		}
	}
	ra := d.vol.ReadaheadKB
	if ra == 0 {
		ra = drv.cfg.ReadaheadKB
	}
	if err := drv.sys.setReadahead(d.dir, ra); err != nil {
		log.Printf("stfs-csi: %s: readahead %d KiB: %v", d.key, ra, err)
	}
	for t := range d.targets { // a recovery's: in place of the dead one
		if err := drv.sys.rebind(d.dir, t); err != nil {
			log.Printf("stfs-csi: %s: %v", d.key, err)
		}
	}
	how := ""
	if d.vol.Offline {
		how = " offline, from the node cache,"
	}
	log.Printf("stfs-csi: %s: daemon pid %d serves %s%s on %s", d.key, d.pid, d.vol.Source, how, d.dir)
	if len(d.targets) == 0 && d.waiters == 0 {
		// its publisher may have given up (a deadline): the grace time
		// runs until one binds it
		drv.releaseLocked(d, "")
	}
}

// watch follows the launcher's connection of one start; its end (the
// daemon exited, or the launcher went away) calls for a recovery.
func (drv *Driver) watch(d *daemon, gen int, conn daemonConn, exited chan<- launch.Event) {
	var last launch.Event
	for {
		ev, err := conn.next()
		if err != nil {
			break
		}
		if ev.Exited {
			last = ev
			break
		}
	}
	exited <- last
	if !last.Exited && drv.sys.alive(d.dir, 5*time.Second) {
		// the launcher went (restarted, say) and its daemon serves on:
		// the checks of the mount watch it from now on
		log.Printf("stfs-csi: %s: the launcher's connection ended; the daemon still serves", d.key)
		return
	}
	drv.recover(d, gen, "its daemon exited")
}

// recover mounts d again, when gen is still its start; its targets keep
// the dead mount (ENOTCONN) until the new one is put in their place
// (waitReady).  With no target left it stops d instead.
func (drv *Driver) recover(d *daemon, gen int, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.removed || d.gen != gen || !d.live {
		return
	}
	log.Printf("stfs-csi: %s: %s: mounting %s again for %d targets", d.key, why, d.vol.Source, len(d.targets))
	d.live = false
	if d.conn != nil {
		d.conn.Close()
	}
	// The dead mount stays on each target and the new one goes on top of
	// it (waitReady, rebind): a pod's container holds a bind of the target
	// mount itself, made a slave of it (HostToContainer), so only a mount
	// on top of that mount reaches it; one moved beneath, or the dead one
	// unmounted first, leaves the container's copy cut off from every
	// later mount (what kubelet's pods showed: tests/csi/test_cluster.py).
	// Unpublish takes the whole stack off.
	if len(d.targets) == 0 {
		drv.stopLocked(d)
		return
	}
	drv.countRecovery()
	drv.restartLocked(d)
}

// restartLocked starts d again (waitReady binds its targets); on failure
// it tries again later.  With d.mu held.
func (drv *Driver) restartLocked(d *daemon) {
	if d.needsSecrets {
		log.Printf("stfs-csi: %s: its credentials went with the plugin's restart: mounted again at its next publish", d.key)
		return
	}
	if d.starting != nil {
		return
	}
	if err := drv.start(d); err != nil {
		log.Printf("stfs-csi: %s: mounting again failed: %v", d.key, err)
		drv.retryLater(d)
	}
}

// retryLater tries a recovery again after the check interval.  With d.mu
// held.
func (drv *Driver) retryLater(d *daemon) {
	gen := d.gen
	if d.retry != nil {
		d.retry.Stop()
	}
	d.retry = time.AfterFunc(drv.cfg.CheckInterval, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.removed && !d.live && d.gen == gen && len(d.targets) > 0 {
			drv.restartLocked(d)
		}
	})
}

// stopLocked unmounts d (its daemon then exits) and forgets it.  With d.mu
// held.
func (drv *Driver) stopLocked(d *daemon) {
	d.removed = true
	d.live = false
	d.gen++
	if d.grace != nil {
		d.grace.Stop()
	}
	if d.retry != nil {
		d.retry.Stop()
	}
	if err := drv.sys.unmountAll(d.dir); err != nil {
		log.Printf("stfs-csi: %s: %v", d.key, err)
	}
	os.Remove(d.dir)
	os.Remove(d.dir + ".json")
	drv.forgetMetrics(d.key)
	if d.conn != nil {
		d.conn.Close()
	}
	d.vol = &Volume{Source: d.vol.Source, Offline: d.vol.Offline} // the credentials go
	drv.mu.Lock()
	if drv.daemons[d.key] == d {
		delete(drv.daemons, d.key)
	}
	drv.mu.Unlock()
	log.Printf("stfs-csi: %s: unmounted (no target left)", d.key)
}

// release drops target from d; the last one arms the grace timer.  With
// d.mu held.
func (drv *Driver) releaseLocked(d *daemon, target string) {
	delete(d.targets, target)
	if len(d.targets) > 0 || d.removed {
		return
	}
	if d.grace != nil {
		d.grace.Stop()
	}
	gen := d.gen
	d.grace = time.AfterFunc(drv.cfg.Grace, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.removed && len(d.targets) == 0 && d.gen == gen {
			drv.stopLocked(d)
		}
	})
}

// check looks at every live daemon's mount: one that answers ENOTCONN is
// mounted again (the launcher's news usually comes first).
func (drv *Driver) check() {
	drv.mu.Lock()
	ds := make([]*daemon, 0, len(drv.daemons))
	for _, d := range drv.daemons {
		ds = append(ds, d)
	}
	drv.mu.Unlock()
	for _, d := range ds {
		d.mu.Lock()
		live, gen, dir := d.live, d.gen, d.dir
		d.mu.Unlock()
		if live && !drv.sys.alive(dir, 5*time.Second) {
			drv.recover(d, gen, "its mount answers ENOTCONN")
		}
	}
}

// Shutdown stops every timer; mounts and daemons stay (a restarted driver
// finds the pods still reading).
func (drv *Driver) Shutdown() {
	drv.mu.Lock()
	defer drv.mu.Unlock()
	for _, d := range drv.daemons {
		if d.grace != nil {
			d.grace.Stop()
		}
		if d.retry != nil {
			d.retry.Stop()
		}
	}
}

var errGone = errors.New("daemon stopped meanwhile")
