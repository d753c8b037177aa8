// swap.go: a recovery that never shows an empty folder.  A daemon's new
// FUSE mount is made detached (fsopen, fsmount), waited for until its
// daemon answers, and only then put in place: beneath the dead mount on
// the daemon's directory and on each target (move_mount with
// MOVE_MOUNT_BENEATH, Linux 6.5), after which the dead mount on top is
// detached.  On each target the new mount goes on top of the dead one
// (rebind), which is what a pod's container sees.  A reader sees the dead
// mount (ENOTCONN) and then the new one, never the empty directory
// beneath (ENOENT).
package driver

import (
	"context"
	"errors"
	"fmt"
	"log"

	"golang.org/x/sys/unix"
)

// moveMountBeneath: MOVE_MOUNT_BENEATH (Linux 6.5; not in x/sys yet).
const moveMountBeneath = 0x200

// fuseMountDetached opens /dev/fuse and makes a FUSE mount of it that is
// attached nowhere yet, read-only, for any user, the files owned by
// uid/gid (the daemon's): the descriptor of /dev/fuse (for the daemon)
// and that of the mount (for moveInPlace).  The mount goes when its
// descriptor is closed before it is moved.
func fuseMountDetached(name string, uid, gid int) (fuse, mnt int, err error) {
	fuse, err = unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("open /dev/fuse: %w", err)
	}
	fs, err := unix.Fsopen("fuse", unix.FSOPEN_CLOEXEC)
	if err != nil {
		unix.Close(fuse)
		return -1, -1, fmt.Errorf("fsopen fuse: %w", err)
	}
	defer unix.Close(fs)
	set := [][2]string{{"source", name}, {"subtype", "stfs"}, {"fd", fmt.Sprint(fuse)},
		{"rootmode", "40000"}, {"user_id", fmt.Sprint(uid)}, {"group_id", fmt.Sprint(gid)}}
	for _, kv := range set {
		if err = unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			break
		}
	}
	for _, f := range []string{"ro", "allow_other", "default_permissions"} {
		if err == nil {
			err = unix.FsconfigSetFlag(fs, f)
		}
	}
	if err == nil {
		err = unix.FsconfigCreate(fs)
	}
	if err == nil {
		mnt, err = unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC,
			unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	}
	if err != nil {
		unix.Close(fuse)
		return -1, -1, fmt.Errorf("a FUSE mount: %w", err)
	}
	return fuse, mnt, nil
}

// mountReady waits until the detached mount mnt answers statfs (its
// daemon has answered INIT), or ctx ends, or the mount says its daemon is
// gone.
func mountReady(ctx context.Context, mnt int) error {
	res := make(chan error, 1)
	go func() {
		var st unix.Statfs_t
		res <- unix.Fstatfs(mnt, &st)
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cloneReadOnly: a detached read-only copy of the mount on src (a bind),
// to be moved onto a target.
func cloneReadOnly(src string) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("clone %s: %w", src, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("clone %s read-only: %w", src, err)
	}
	return fd, nil
}

// moveInPlace puts the detached mount mnt on path.  When something is
// mounted there already (a dead daemon's mount) mnt goes beneath it and
// the old one is then detached: path is never left empty.  A kernel
// without MOVE_MOUNT_BENEATH gets the old way: the old mount off, then
// the new one on.
func moveInPlace(mnt int, path string) error {
	on, err := isMountPoint(path)
	if err != nil {
		return err
	}
	if on {
		err = unix.MoveMount(mnt, "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH|moveMountBeneath)
		if err == nil {
			if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount the old mount on %s: %w", path, err)
			}
			return nil
		}
		if !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("mount beneath %s: %w", path, err)
		}
		log.Printf("stfs-csi: mount beneath %s: %v: the old mount comes off first", path, err)
		if err := unmountAll(path); err != nil {
			return err
		}
	}
	if err := unix.MoveMount(mnt, "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount on %s: %w", path, err)
	}
	return nil
}

// rebind puts a read-only bind of the mount on src onto target, on top of
// what is there (a recovery's dead mount): a pod's container holds a
// slave copy of the target's mount itself, which sees mounts made on top
// of it and nothing made beneath (tests/csi/test_cluster.py: kubelet's pods
// read again only so).  One dead mount stays under the live one per
// recovery, until unpublish takes the stack off (unmountAll).
func rebind(src, target string) error {
	fd, err := cloneReadOnly(src)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount on %s: %w", target, err)
	}
	return nil
}
