// sys.go: the privileged system calls of the driver: read-only bind
// mounts, unmounts, and the mount's readahead (the FUSE mount itself and
// its swap in a recovery: swap.go).
package driver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// bindReadOnly binds src onto target, read-only.
func bindReadOnly(src, target string) error {
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", target, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		unix.Unmount(target, unix.MNT_DETACH)
		return fmt.Errorf("remount %s read-only: %w", target, err)
	}
	return nil
}

// unmountAll takes every mount off path (a dead FUSE mount too): nil when
// nothing is left mounted there.
func unmountAll(path string) error {
	// a recovery binds on top of the dead mount: one more per recovery
	for i := 0; i < 1024; i++ {
		ok, err := isMountPoint(path)
		if err != nil || !ok {
			return err
		}
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted", path)
}

// isMountPoint: is path a mount point, by the calling thread's mountinfo
// (a stat of a dead FUSE mount would fail; the thread's: a unit test's
// thread has a mount namespace of its own).
func isMountPoint(path string) (bool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescape(fields[4]) == abs {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescape: mountinfo writes ' ', '\t', '\n' and '\\' as \ooo.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// statWait asks the mount on dir for its statfs until it answers (the
// daemon has answered INIT), the context ends, or the mount answers that
// its daemon is gone.  statfs always goes to the daemon (a stat may be
// answered from the kernel's cache of the root's attributes, even on a
// dead mount), and waits in the kernel until INIT is answered, so it runs
// on its own goroutine.
func statWait(ctx context.Context, dir string) error {
	res := make(chan error, 1)
	go func() {
		var st unix.Statfs_t
		res <- unix.Statfs(dir, &st)
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// alive: does the mount on dir answer (within d)?  false only when it
// answers ENOTCONN (or ECONNABORTED): its daemon is gone.
func alive(dir string, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err := statWait(ctx, dir)
	return !(errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED))
}

// setReadahead writes the readahead of the FUSE mount on dir (its backing
// device's read_ahead_kb), which stfs cannot do on /dev/fd/N.
func setReadahead(dir string, kb int) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return err
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	return os.WriteFile(p, []byte(strconv.Itoa(kb)+"\n"), 0o644)
}
