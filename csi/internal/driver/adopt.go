// adopt.go: what survives a restart of the plugin.  The daemons and their
// mounts do (they live in the launcher's container, the mounts on the
// node), and so do the pods' binds; the plugin's memory does not.  Each
// daemon's mount has beside it KEY.json (its source and options, never a
// credential); a plugin that starts finds every live mount under
// STATE/mounts, the targets bound from it (the same device in mountinfo),
// and takes them over: unpublish, the grace time, a second pod's publish
// and recovery work as before.  A daemon that was given credentials is
// mounted again after a crash only once a publish brings them again.
package driver

import (
	"bufio"
	"encoding/json"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type meta struct {
	Source      string   `json:"source"`
	Options     []string `json:"options"`
	ReadaheadKB int      `json:"readaheadKB"`
	Secrets     bool     `json:"secrets"` // whether it had any: never what
	Offline     bool     `json:"offline,omitempty"`
}

func writeMeta(d *daemon) error {
	b, err := json.Marshal(meta{d.vol.Source, d.vol.Options, d.vol.ReadaheadKB, len(d.vol.Secrets) > 0, d.vol.Offline})
	if err != nil {
		return err
	}
	tmp := d.dir + ".json.tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.dir+".json")
}

// topDevice: the device ("MAJOR:MINOR") of the topmost mount on path, by
// /proc/self/mountinfo; "" when nothing is mounted there.
func topDevice(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	dev := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) > 4 && unescape(fl[4]) == abs {
			dev = fl[2]
		}
	}
	return dev
}

// mountsByDevice: mount points by their device ("MAJOR:MINOR"), from
// /proc/self/mountinfo.
func mountsByDevice() (map[string][]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) > 4 {
			out[fl[2]] = append(out[fl[2]], unescape(fl[4]))
		}
	}
	return out, sc.Err()
}

// Adopt takes over the daemons a previous run of the plugin left: the
// number adopted.  A dead one is then recovered as any (its targets keep
// the dead mount until the new one takes its place); a mount there with no
// metadata is unmounted with its targets.
func (drv *Driver) Adopt() (int, error) {
	dir := filepath.Join(drv.cfg.StateDir, "mounts")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	devs, err := drv.sys.mounts()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		key, path := e.Name(), filepath.Join(dir, e.Name())
		if ok, _ := drv.sys.isMountPoint(path); !ok {
			os.Remove(path)
			os.Remove(path + ".json")
			continue
		}
		var m meta
		b, rerr := os.ReadFile(path + ".json")
		// its device by mountinfo: a stat of a dead mount may fail
		dev := drv.sys.topDevice(path)
		var targets []string
		for _, p := range devs[dev] {
			if p != path {
				targets = append(targets, p)
			}
		}
		if rerr != nil || json.Unmarshal(b, &m) != nil || dev == "" {
			log.Printf("stfs-csi: %s: an unknown mount: unmounted with its %d targets", key, len(targets))
			for _, t := range targets {
				drv.sys.unmountAll(t)
			}
			drv.sys.unmountAll(path)
			os.Remove(path)
			os.Remove(path + ".json")
			continue
		}
		d := &daemon{key: key, dir: path, live: true, targets: map[string]bool{},
			vol: &Volume{Source: m.Source, Options: m.Options, ReadaheadKB: m.ReadaheadKB, Secrets: map[string]string{},
				Offline: m.Offline},
			needsSecrets: m.Secrets} // offline too: they name its trust domain
		drv.mu.Lock()
		for _, t := range targets {
			d.targets[t] = true
			drv.targets[t] = published{"", key}
		}
		drv.daemons[key] = d
		drv.mu.Unlock()
		if len(targets) == 0 {
			d.mu.Lock()
			drv.releaseLocked(d, "")
			d.mu.Unlock()
		}
		log.Printf("stfs-csi: %s: adopted the daemon of %s with %d targets", key, m.Source, len(targets))
		n++
		if !drv.sys.alive(path, 5*time.Second) {
			// died while no plugin ran: mounted again like any dead
			// daemon, its targets keeping the dead mount meanwhile
			drv.recover(d, d.gen, "its mount answers ENOTCONN")
		}
	}
	return n, nil
}
