package driver

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// tmpfsDetached: a tmpfs attached nowhere, holding the file f with text.
func tmpfsDetached(t *testing.T, text string) int {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigCreate(fs); err != nil {
		t.Fatal(err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Openat(mnt, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(fd, []byte(text))
	unix.Close(fd)
	return mnt
}

// mountsOn: how many mounts are on path.
func mountsOn(t *testing.T, path string) int {
	b, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if fl := strings.Fields(line); len(fl) > 4 && unescape(fl[4]) == path {
			n++
		}
	}
	return n
}

// TestMoveInPlace (root): a mount put on an empty directory, then another
// in its place: the path shows the new one, one mount is left; a
// read-only rebind of it goes on top of a target's bind (one more mount
// each round: what a pod's container sees), and unmountAll takes the
// stack off.
func TestMoveInPlace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts: root only")
	}
	// a mount namespace of this thread's own; the thread ends with the
	// test (never unlocked)
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		t.Skip("unshare: ", err)
	}
	// this thread's own namespace, private: nothing reaches the host
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	dir, target := t.TempDir(), t.TempDir()
	t.Cleanup(func() { // before TempDir's (cleanups run last first)
		unmountAll(target)
		unmountAll(dir)
	})
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(p, "f"))
		if err != nil {
			return err.Error()
		}
		return string(b)
	}
	for i, text := range []string{"one", "two", "three"} {
		mnt := tmpfsDetached(t, text)
		err := moveInPlace(mnt, dir)
		unix.Close(mnt)
		if err != nil {
			t.Fatal(err)
		}
		if got := read(dir); got != text || mountsOn(t, dir) != 1 {
			t.Fatalf("round %d: %q, %d mounts", i, got, mountsOn(t, dir))
		}
		if err := rebind(dir, target); err != nil {
			t.Fatal(err)
		}
		if got := read(target); got != text || mountsOn(t, target) != i+1 {
			t.Fatalf("round %d: target %q, %d mounts", i, got, mountsOn(t, target))
		}
		if err := os.WriteFile(filepath.Join(target, "g"), nil, 0o644); err == nil {
			t.Fatalf("round %d: the target is writable", i)
		}
	}
	if err := unmountAll(target); err != nil || mountsOn(t, target) != 0 {
		t.Fatalf("unmountAll: %v, %d mounts left", err, mountsOn(t, target))
	}
}
