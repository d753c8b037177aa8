package driver

// fake_test.go: a node in memory behind the driver's system seam
// (system.go): mounts as stacks of superblocks per path, daemons as
// processes a test can kill, the launcher's connections as channels.  The
// driver's state machine runs on it unchanged (state_test.go).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"stfs/csi/internal/launch"
)

// fakeProc: one stfs daemon the fake launcher started.
type fakeProc struct {
	pid    int
	req    launch.Request
	exited chan launch.Event // its exit, once
	gone   chan struct{}     // closed at its exit
	once   sync.Once
	closed chan struct{} // the driver closed its connection
	cOnce  sync.Once
}

// exit ends the daemon with status st and its last words stderr.
func (p *fakeProc) exit(st int, stderr string) {
	p.once.Do(func() {
		p.exited <- launch.Event{Exited: true, Status: st, Stderr: stderr}
		close(p.gone)
	})
}

func (p *fakeProc) dead() bool {
	select {
	case <-p.gone:
		return true
	default:
		return false
	}
}

func (p *fakeProc) next() (launch.Event, error) {
	select {
	case ev := <-p.exited:
		select {
		case <-p.closed: // closed first: the news is no one's
		default:
			return ev, nil
		}
	case <-p.closed:
	}
	return launch.Event{}, errors.New("the connection is closed")
}

func (p *fakeProc) Close() error {
	p.cOnce.Do(func() { close(p.closed) })
	return nil
}

// fakeSB: a FUSE mount (its superblock): binds share it.
type fakeSB struct {
	dev   string
	proc  *fakeProc // nil until the launcher starts its daemon
	moved bool      // attached somewhere: its descriptor's close keeps it
}

type fakeSys struct {
	mu       sync.Mutex
	fds      int
	devs     int
	open     map[int]*fakeSB // open descriptors: a /dev/fuse or a mount
	on       map[string][]*fakeSB
	procs    []*fakeProc
	launches int
	// what a daemon does: exit at once with this status and stderr
	// (when the status is not 0); wait for hold before serving
	answer func(launch.Request) (int, string)
	hold   chan struct{}
	// launchDelay: how long the launcher takes to answer (widens races)
	launchDelay time.Duration
}

func newFakeSys() *fakeSys {
	return &fakeSys{open: map[int]*fakeSB{}, on: map[string][]*fakeSB{}}
}

func (f *fakeSys) newMount(name string, uid, gid int) (int, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.devs++
	sb := &fakeSB{dev: fmt.Sprintf("0:%d", 100+f.devs)}
	f.fds += 2
	f.open[f.fds-1], f.open[f.fds] = sb, sb
	return f.fds - 1, f.fds, nil
}

func (f *fakeSys) closeFD(fd int) {
	f.mu.Lock()
	sb := f.open[fd]
	delete(f.open, fd)
	f.mu.Unlock()
	if sb != nil && !sb.moved && sb.proc != nil && !f.held(sb) {
		sb.proc.exit(1, "") // a mount that went before it was placed: ENODEV
	}
}

// held: whether a descriptor of sb is still open.
func (f *fakeSys) held(sb *fakeSB) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range f.open {
		if o == sb {
			return true
		}
	}
	return false
}

func (f *fakeSys) launch(socket string, req launch.Request, fuse int) (daemonConn, launch.Event, error) {
	if f.launchDelay > 0 {
		time.Sleep(f.launchDelay)
	}
	f.mu.Lock()
	sb := f.open[fuse]
	if sb == nil {
		f.mu.Unlock()
		return nil, launch.Event{}, errors.New("no /dev/fuse descriptor")
	}
	f.launches++
	p := &fakeProc{pid: 1000 + f.launches, req: req, exited: make(chan launch.Event, 1),
		gone: make(chan struct{}), closed: make(chan struct{})}
	sb.proc = p
	f.procs = append(f.procs, p)
	answer := f.answer
	f.mu.Unlock()
	if answer != nil {
		if st, stderr := answer(req); st != 0 {
			p.exit(st, stderr)
		}
	}
	return p, launch.Event{Started: true, Pid: p.pid}, nil
}

func (f *fakeSys) probe(socket string) error { return nil }

func (f *fakeSys) mountReady(ctx context.Context, mnt int) error {
	f.mu.Lock()
	sb, hold := f.open[mnt], f.hold
	f.mu.Unlock()
	if sb == nil || sb.proc == nil {
		return syscall.EBADF
	}
	if hold != nil {
		select {
		case <-hold:
		case <-sb.proc.gone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if sb.proc.dead() {
		return syscall.ENOTCONN
	}
	return nil
}

// place puts sb on path in place of its top mount (beneath it, then the
// top detached: moveInPlace), or on it when there is none.
func (f *fakeSys) place(sb *fakeSB, path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb.moved = true
	if st := f.on[path]; len(st) > 0 {
		old := st[len(st)-1]
		st[len(st)-1] = sb
		f.dropLocked(old)
		return
	}
	f.on[path] = append(f.on[path], sb)
}

// dropLocked: sb mounted nowhere any more: its daemon ends.
func (f *fakeSys) dropLocked(sb *fakeSB) {
	for _, st := range f.on {
		for _, o := range st {
			if o == sb {
				return
			}
		}
	}
	if sb.proc != nil {
		sb.proc.exit(0, "")
	}
}

func (f *fakeSys) moveInPlace(mnt int, path string) error {
	f.mu.Lock()
	sb := f.open[mnt]
	f.mu.Unlock()
	if sb == nil {
		return syscall.EBADF
	}
	f.place(sb, path)
	return nil
}

func (f *fakeSys) top(path string) *fakeSB {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.on[path]; len(st) > 0 {
		return st[len(st)-1]
	}
	return nil
}

// rebind: on top of what is there, as swap.go's (a pod's container sees
// only mounts made on top of the target's)
func (f *fakeSys) rebind(src, target string) error {
	sb := f.top(src)
	if sb == nil {
		return fmt.Errorf("clone %s: not a mount", src)
	}
	f.mu.Lock()
	sb.moved = true
	f.on[target] = append(f.on[target], sb)
	f.mu.Unlock()
	return nil
}

func (f *fakeSys) bindReadOnly(src, target string) error {
	sb := f.top(src)
	if sb == nil {
		return fmt.Errorf("bind %s: %s is not mounted", target, src)
	}
	f.mu.Lock()
	f.on[target] = append(f.on[target], sb)
	f.mu.Unlock()
	return nil
}

func (f *fakeSys) unmountAll(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.on[path]
	delete(f.on, path)
	for _, sb := range st {
		f.dropLocked(sb)
	}
	return nil
}

func (f *fakeSys) isMountPoint(path string) (bool, error) { return f.top(path) != nil, nil }

func (f *fakeSys) alive(dir string, d time.Duration) bool {
	sb := f.top(dir)
	return sb == nil || sb.proc == nil || !sb.proc.dead()
}

func (f *fakeSys) setReadahead(dir string, kb int) error { return nil }

func (f *fakeSys) mounts() (map[string][]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]string{}
	for p, st := range f.on {
		for _, sb := range st {
			out[sb.dev] = append(out[sb.dev], p)
		}
	}
	return out, nil
}

func (f *fakeSys) topDevice(path string) string {
	if sb := f.top(path); sb != nil {
		return sb.dev
	}
	return ""
}

// live: the daemons that have not exited.
func (f *fakeSys) live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.procs {
		if !p.dead() {
			n++
		}
	}
	return n
}

func (f *fakeSys) started() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.launches
}

func (f *fakeSys) proc(i int) *fakeProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.procs[i]
}

func (f *fakeSys) openFDs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.open)
}

// stacked: how many mounts are on path.
func (f *fakeSys) stacked(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.on[path])
}

// mortal: a plugin's view of the fake node that ends with the plugin: once
// dead, it changes nothing and sees every mount alive (its goroutines
// still running in the test are no process on a real node).
type mortal struct {
	*fakeSys
	dead atomic.Bool
}

var errDead = errors.New("the plugin is dead")

func (m *mortal) alive(dir string, d time.Duration) bool {
	return m.dead.Load() || m.fakeSys.alive(dir, d)
}

func (m *mortal) newMount(name string, uid, gid int) (int, int, error) {
	if m.dead.Load() {
		return -1, -1, errDead
	}
	return m.fakeSys.newMount(name, uid, gid)
}

func (m *mortal) moveInPlace(mnt int, path string) error {
	if m.dead.Load() {
		return errDead
	}
	return m.fakeSys.moveInPlace(mnt, path)
}

func (m *mortal) rebind(src, target string) error {
	if m.dead.Load() {
		return errDead
	}
	return m.fakeSys.rebind(src, target)
}

func (m *mortal) unmountAll(path string) error {
	if m.dead.Load() {
		return errDead
	}
	return m.fakeSys.unmountAll(path)
}
