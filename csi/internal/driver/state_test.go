package driver

// state_test.go: the publish and daemon state machine on the fake node
// (fake_test.go): two pods on one daemon, the grace time, --max-daemons,
// a daemon's death and recovery, adoption after a restart of the plugin,
// and concurrent publishes of one volume.  Every wait is on a condition.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type testNode struct {
	t      *testing.T
	f      *fakeSys
	cfg    Config
	models string
	pods   string
}

func newTestNode(t *testing.T, mod func(*Config)) *testNode {
	dir := t.TempDir()
	n := &testNode{t: t, f: newFakeSys(), models: filepath.Join(dir, "models"), pods: filepath.Join(dir, "pods")}
	for _, m := range []string{"a", "b", "c"} {
		os.MkdirAll(filepath.Join(n.models, m), 0o755)
		os.WriteFile(filepath.Join(n.models, m, "model.safetensors"), []byte("x"), 0o644)
	}
	n.cfg = Config{NodeID: "node", StateDir: filepath.Join(dir, "state"),
		CacheDir: filepath.Join(dir, "cache"), LocalDir: n.models,
		Launcher: filepath.Join(dir, "run", "launcher.sock"), DaemonUID: os.Getuid(), DaemonGID: os.Getgid(),
		Grace: time.Hour, CheckInterval: time.Hour, StartTimeout: 30 * time.Second}
	if mod != nil {
		mod(&n.cfg)
	}
	return n
}

// driver: a plugin on the node (a second call: a restarted plugin).
func (n *testNode) driver() *Driver {
	drv, err := New(n.cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	drv.sys = n.f
	n.t.Cleanup(drv.Shutdown)
	return drv
}

func (n *testNode) source(m string) string {
	return filepath.Join(n.models, m, "model.safetensors")
}

func (n *testNode) target(pod string) string {
	return filepath.Join(n.pods, pod, "volumes", "v")
}

func (n *testNode) publish(drv *Driver, model, pod string) error {
	_, err := drv.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: "vol-" + pod, TargetPath: n.target(pod),
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY}},
		VolumeContext: map[string]string{AttrSource: n.source(model)}})
	return err
}

func (n *testNode) mustPublish(drv *Driver, model, pod string) {
	if err := n.publish(drv, model, pod); err != nil {
		n.t.Fatalf("publish %s on %s: %v", model, pod, err)
	}
}

func (n *testNode) unpublish(drv *Driver, pod string) {
	_, err := drv.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{
		VolumeId: "vol-" + pod, TargetPath: n.target(pod)})
	if err != nil {
		n.t.Fatalf("unpublish %s: %v", pod, err)
	}
}

// serves: the live daemon (the fake's index) that pod's target shows.
func (n *testNode) serves(pod string) *fakeProc {
	sb := n.f.top(n.target(pod))
	if sb == nil || sb.proc == nil || sb.proc.dead() {
		return nil
	}
	return sb.proc
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestTwoPodsShareOneDaemon(t *testing.T) {
	n := newTestNode(t, nil)
	drv := n.driver()
	n.mustPublish(drv, "a", "p1")
	n.mustPublish(drv, "a", "p2")
	n.mustPublish(drv, "a", "p2") // kubelet again: the same answer
	if got := n.f.started(); got != 1 {
		t.Fatalf("%d daemons started for one volume, want 1", got)
	}
	p := n.f.proc(0)
	if n.serves("p1") != p || n.serves("p2") != p {
		t.Fatal("the two pods are not bound to the one daemon")
	}
	n.unpublish(drv, "p1")
	if n.serves("p2") != p || p.dead() {
		t.Fatal("the first pod's unpublish took the daemon from the second")
	}
	if _, err := os.Stat(n.target("p1")); !os.IsNotExist(err) {
		t.Fatalf("the unpublished target stays: %v", err)
	}
	n.unpublish(drv, "p2")
	// the grace time (an hour): the daemon waits for a next pod
	if p.dead() || drv.Daemons() != 1 {
		t.Fatal("the daemon stopped before its grace time")
	}
	n.mustPublish(drv, "a", "p3")
	if n.f.started() != 1 || n.serves("p3") != p {
		t.Fatal("a pod within the grace time did not get the same daemon")
	}
}

func TestGraceTimeEnds(t *testing.T) {
	n := newTestNode(t, func(c *Config) { c.Grace = 20 * time.Millisecond })
	drv := n.driver()
	n.mustPublish(drv, "a", "p1")
	n.unpublish(drv, "p1")
	waitFor(t, "the daemon stops after its grace time", func() bool {
		return drv.Daemons() == 0 && n.f.live() == 0
	})
	if ok, _ := n.f.isMountPoint(filepath.Join(n.cfg.StateDir, "mounts")); ok || n.f.openFDs() != 0 {
		t.Fatalf("left behind: %d descriptors", n.f.openFDs())
	}
}

func TestMaxDaemons(t *testing.T) {
	n := newTestNode(t, func(c *Config) { c.MaxDaemons = 1 })
	drv := n.driver()
	n.mustPublish(drv, "a", "p1")
	err := n.publish(drv, "b", "p2")
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a second daemon beyond --max-daemons 1: %v, want ResourceExhausted", err)
	}
	n.unpublish(drv, "p1") // a's daemon in its grace time: it makes room
	n.mustPublish(drv, "b", "p2")
	if n.f.started() != 2 || !n.f.proc(0).dead() || n.serves("p2") != n.f.proc(1) {
		t.Fatal("the idle daemon was not stopped to make room for the new one")
	}
	if drv.Daemons() != 1 {
		t.Fatalf("%d daemons, want 1", drv.Daemons())
	}
}

func TestDaemonDiesAndIsRecovered(t *testing.T) {
	n := newTestNode(t, nil)
	drv := n.driver()
	n.mustPublish(drv, "a", "p1")
	n.mustPublish(drv, "a", "p2")
	n.f.proc(0).exit(1, "stfs: killed")
	waitFor(t, "both pods served by a new daemon", func() bool {
		return n.f.started() == 2 && n.serves("p1") == n.f.proc(1) && n.serves("p2") == n.f.proc(1)
	})
	// the new mount on top of the dead one (what a pod's container sees),
	// and unpublish takes the whole stack off
	for _, p := range []string{n.target("p1"), n.target("p2")} {
		if k := n.f.stacked(p); k != 2 {
			t.Fatalf("%s: %d mounts stacked, want the dead one and the new", p, k)
		}
	}
	n.unpublish(drv, "p1")
	if k := n.f.stacked(n.target("p1")); k != 0 {
		t.Fatalf("after unpublish: %d mounts left on the target", k)
	}
	// the options and the source of the first start, once more
	if a, b := n.f.proc(0).req, n.f.proc(1).req; a.Source != b.Source || fmt.Sprint(a.Options) != fmt.Sprint(b.Options) {
		t.Fatalf("recovered with another request: %v, then %v", a, b)
	}
}

func TestRestartAdoptsDaemons(t *testing.T) {
	n := newTestNode(t, nil)
	old := n.driver()
	view := &mortal{fakeSys: n.f}
	old.sys = view
	n.mustPublish(old, "a", "p1")
	n.mustPublish(old, "b", "p2")
	// the plugin goes: its connections to the launcher end, the daemons
	// and the mounts stay
	old.Shutdown()
	view.dead.Store(true)
	n.f.proc(0).Close()
	n.f.proc(1).Close()
	drv := n.driver()
	if got, err := drv.Adopt(); err != nil || got != 2 {
		t.Fatalf("adopted %d (%v), want 2", got, err)
	}
	n.mustPublish(drv, "a", "p3") // a second pod: the adopted daemon
	if n.f.started() != 2 || n.serves("p3") != n.f.proc(0) {
		t.Fatal("a publish after the restart started a daemon anew")
	}
	// the adopted daemon of b dies: the mount checks find it
	n.f.proc(1).exit(1, "")
	drv.check()
	waitFor(t, "the adopted daemon recovered", func() bool {
		return n.f.started() == 3 && n.serves("p2") == n.f.proc(2)
	})
	n.unpublish(drv, "p1")
	n.unpublish(drv, "p3")
	if n.f.top(n.target("p1")) != nil || n.f.proc(0).dead() {
		t.Fatal("the adopted daemon's unpublish: wrong")
	}
}

func TestConcurrentPublishesStartOneDaemon(t *testing.T) {
	n := newTestNode(t, nil)
	n.f.hold = make(chan struct{}) // the daemon serves when the test says
	n.f.launchDelay = 5 * time.Millisecond
	drv := n.driver()
	const pods = 8
	errs := make(chan error, pods)
	var wg sync.WaitGroup
	for i := 0; i < pods; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- n.publish(drv, "a", fmt.Sprintf("p%d", i))
		}(i)
	}
	waitFor(t, "every publish waiting for the start", func() bool {
		drv.mu.Lock()
		waiting := 0
		for _, d := range drv.daemons {
			d.mu.Lock()
			waiting += d.waiters
			d.mu.Unlock()
		}
		drv.mu.Unlock()
		return waiting == pods || n.f.started() > 1
	})
	close(n.f.hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := n.f.started(); got != 1 {
		t.Fatalf("%d daemons started for %d concurrent publishes of one volume, want 1", got, pods)
	}
	for i := 0; i < pods; i++ {
		if n.serves(fmt.Sprintf("p%d", i)) != n.f.proc(0) {
			t.Fatalf("p%d is not bound to the daemon", i)
		}
	}
}

// TestStopEndsServe: Stop is a graceful end of Serve (nil), not an error
// to recognise by its words.
func TestStopEndsServe(t *testing.T) {
	n := newTestNode(t, func(c *Config) { c.CheckInterval = time.Millisecond })
	drv := n.driver()
	l, err := Listen("unix://" + filepath.Join(t.TempDir(), "csi.sock"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- drv.Serve(l) }()
	waitFor(t, "the server up", func() bool {
		drv.srvMu.Lock()
		defer drv.srvMu.Unlock()
		return drv.srv != nil
	})
	drv.Stop(5 * time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Serve after Stop: %v, want nil", err)
	}
}
