// system.go: the seam between the driver's state machine (node.go,
// daemons.go, adopt.go) and the node: every mount call and every word
// with the launcher goes through system.  The plugin uses realSystem (the
// system calls of sys.go and swap.go, the launcher's socket); the unit
// tests use a fake (fake_test.go) that keeps its mounts and daemons in
// memory, so the publish, grace, recovery and adoption rules are tested
// in seconds, under -race, without root or /dev/fuse.
package driver

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"stfs/csi/internal/launch"
)

// system: the driver's mount and process calls.
type system interface {
	// newMount: a FUSE mount attached nowhere yet, the descriptor of
	// its /dev/fuse (for the daemon) and that of the mount (swap.go)
	newMount(name string, uid, gid int) (fuse, mnt int, err error)
	closeFD(fd int)
	// mountReady waits until the detached mount mnt answers
	mountReady(ctx context.Context, mnt int) error
	// moveInPlace puts mnt on path, beneath a mount there (swap.go)
	moveInPlace(mnt int, path string) error
	rebind(src, target string) error
	bindReadOnly(src, target string) error
	unmountAll(path string) error
	isMountPoint(path string) (bool, error)
	// alive: false only when the mount on dir answers ENOTCONN
	alive(dir string, d time.Duration) bool
	setReadahead(dir string, kb int) error
	// mounts: the mount points by device (adopt.go)
	mounts() (map[string][]string, error)
	topDevice(path string) string
	// launch hands fuse with req to the launcher at socket: its first
	// answer, and the connection that brings the daemon's exit
	launch(socket string, req launch.Request, fuse int) (daemonConn, launch.Event, error)
	// probe: does the launcher at socket take a connection
	probe(socket string) error
}

// daemonConn: the launcher's connection of one start of a daemon.
type daemonConn interface {
	// next: the launcher's next event; an error when the connection ends
	next() (launch.Event, error)
	Close() error
}

// realSystem: the node's.
type realSystem struct{}

func (realSystem) newMount(name string, uid, gid int) (int, int, error) {
	return fuseMountDetached(name, uid, gid)
}
func (realSystem) closeFD(fd int)                                { unix.Close(fd) }
func (realSystem) mountReady(ctx context.Context, mnt int) error { return mountReady(ctx, mnt) }
func (realSystem) moveInPlace(mnt int, path string) error        { return moveInPlace(mnt, path) }
func (realSystem) rebind(src, target string) error               { return rebind(src, target) }
func (realSystem) bindReadOnly(src, target string) error         { return bindReadOnly(src, target) }
func (realSystem) unmountAll(path string) error                  { return unmountAll(path) }
func (realSystem) isMountPoint(path string) (bool, error)        { return isMountPoint(path) }
func (realSystem) alive(dir string, d time.Duration) bool        { return alive(dir, d) }
func (realSystem) setReadahead(dir string, kb int) error         { return setReadahead(dir, kb) }
func (realSystem) mounts() (map[string][]string, error)          { return mountsByDevice() }
func (realSystem) topDevice(path string) string                  { return topDevice(path) }

// unixConn: a launcher's connection.
type unixConn struct{ *net.UnixConn }

func (c unixConn) next() (launch.Event, error) {
	var ev launch.Event
	_, err := launch.ReadMessage(c.UnixConn, &ev)
	return ev, err
}

func (realSystem) launch(socket string, req launch.Request, fuse int) (daemonConn, launch.Event, error) {
	var ev launch.Event
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return nil, ev, fmt.Errorf("the launcher (%s): %w", socket, err)
	}
	if err := launch.WriteMessage(conn, req, fuse); err != nil {
		conn.Close()
		return nil, ev, err
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := launch.ReadMessage(conn, &ev); err != nil {
		conn.Close()
		return nil, ev, fmt.Errorf("the launcher: %w", err)
	}
	conn.SetReadDeadline(time.Time{})
	return unixConn{conn}, ev, nil
}

func (realSystem) probe(socket string) error {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err == nil {
		c.Close()
	}
	return err
}
