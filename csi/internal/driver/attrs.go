// attrs.go: what a pod may ask for. The volume attributes (source,
// options, allowBranch, allowOfflineCache, mirror), the stfs -o options a pod may set, the secrets a
// pod may hand over, and the key that names the daemon serving them.
package driver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Attribute names of a volume (a PV's volumeAttributes or an inline
// volume's volumeAttributes).
const (
	AttrSource      = "source"
	AttrOptions     = "options"
	AttrAllowBranch = "allowBranch"
	// AttrAllowOfflineCache: "true" lets a publish fall back to the node
	// cache (stfs -o offline) when the origin cannot be reached
	AttrAllowOfflineCache = "allowOfflineCache"
	// AttrMirror: s3://BUCKET/PREFIX, a mirror `stfs mirror` wrote of
	// the source (stfs -o mirror=, docs/mirror.md): a remote source's
	// files read from there, each block checked against its manifest
	AttrMirror = "mirror"
)

// A mirror's s3://BUCKET/PREFIX: no control, comma or backslash (stfs's
// option parser would read them).
var mirrorRe = regexp.MustCompile(`^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\x00-\x1f\x7f,\\]*)?$`)

// Secret keys a nodePublishSecretRef may hold: each reaches the daemon's
// environment, nothing else does.  The STFS_MIRROR_AWS_* keys are the
// mirror's own (read-only) keys, which stfs reads the mirror with alone:
// CSI gives a publish one secret, so the mirror's keys are named apart
// from the origin's in it, and neither is ever sent to the other.
var secretKeys = map[string]bool{
	"HF_TOKEN":                          true,
	"AWS_ACCESS_KEY_ID":                 true,
	"AWS_SECRET_ACCESS_KEY":             true,
	"AWS_SESSION_TOKEN":                 true,
	"STFS_MIRROR_AWS_ACCESS_KEY_ID":     true,
	"STFS_MIRROR_AWS_SECRET_ACCESS_KEY": true,
	"STFS_MIRROR_AWS_SESSION_TOKEN":     true,
}

// The stfs -o options a pod may set: the tree's shape, what is shown, and
// the remote tuning of its own source.  Left out on purpose: cache=,
// cache_size= and nocache (the node's cache is the node's), offline (it
// would read the node cache without asking the origin whether these
// credentials may: allowOfflineCache is the volume's way, and only when
// the origin cannot be reached), log=, uid=, gid=, umask=, max_request= and libfuse's
// own (the driver sets the mount's options), debug.
var flagOptions = map[string]bool{
	"flat": true, "repo": true, "show_virtual": true, "npy": true,
	"unvalidated": true,
}

var valueOptions = map[string]*regexp.Regexp{
	"include":         regexp.MustCompile(`^[^\x00-\x1f]+$`),
	"exclude":         regexp.MustCompile(`^[^\x00-\x1f]+$`),
	"files":           regexp.MustCompile(`^[^\x00-\x1f]+$`),
	"prefetch":        regexp.MustCompile(`^[^\x00-\x1f]+$`),
	"convert":         regexp.MustCompile(`^f32$`),
	"threads":         regexp.MustCompile(`^[0-9]{1,3}$`),
	"readahead":       regexp.MustCompile(`^[0-9]{1,7}$`),
	"connect_timeout": regexp.MustCompile(`^[0-9]{1,6}$`),
	"stall_timeout":   regexp.MustCompile(`^[0-9]{1,6}$`),
	"retries":         regexp.MustCompile(`^[0-9]{1,3}$`),
	"connections":     regexp.MustCompile(`^[0-9]{1,3}$`),
	"min_speed":       regexp.MustCompile(`^[0-9]{1,12}[kKmMgG]?$`),
	"block_size":      regexp.MustCompile(`^[0-9]{1,12}[kKmMgG]?$`),
	"s3_style":        regexp.MustCompile(`^(path|virtual)$`),
}

var commit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Volume is a publish's request, checked.
type Volume struct {
	Source  string
	Options []string // stfs -o options, in the order given
	// ReadaheadKB is readahead=, which the driver applies (0: default)
	ReadaheadKB int
	Secrets     map[string]string
	// AllowOfflineCache: the volume's allowOfflineCache (not in the key:
	// an online daemon is the same with it or without)
	AllowOfflineCache bool
	// Offline: served with stfs's -o offline from the node cache.  Set
	// by the driver only (offline.go), never by a pod; part of the key
	Offline bool
}

// ParseVolume checks a volume's attributes and secrets.  Its errors name
// what is wrong, never a secret's value.
func ParseVolume(attrs, secrets map[string]string) (*Volume, error) {
	v := &Volume{Secrets: map[string]string{}}
	allowBranch := false
	for k, val := range attrs {
		switch {
		case k == AttrSource:
			v.Source = val
		case k == AttrOptions:
		case k == AttrMirror:
		case k == AttrAllowBranch:
			b, err := strconv.ParseBool(val)
			if err != nil {
				return nil, fmt.Errorf("allowBranch=%q: give \"true\" or \"false\"", val)
			}
			allowBranch = b
		case k == AttrAllowOfflineCache:
			switch val {
			case "true":
				v.AllowOfflineCache = true
			case "false":
			default:
				return nil, fmt.Errorf("allowOfflineCache=%q: give \"true\" or \"false\"", val)
			}
		case strings.HasPrefix(k, "csi.storage.k8s.io/"):
			// the pod's name, namespace, uid, service account and
			// "ephemeral", which podInfoOnMount adds: not used
		default:
			return nil, fmt.Errorf("unknown volume attribute %q (known: source, options, allowBranch, allowOfflineCache, mirror)", k)
		}
	}
	if v.Source == "" {
		return nil, fmt.Errorf("the volume attribute \"source\" is missing")
	}
	// any control (a CR, an escape too): the source is in the daemon's
	// log lines and in the publish's errors as written
	if strings.IndexFunc(v.Source, isControl) >= 0 {
		return nil, fmt.Errorf("source: a control character")
	}
	// stfs reads a scheme in any case (HF://... is hf://)
	if strings.HasPrefix(strings.ToLower(v.Source), "hf://") && !allowBranch {
		rev := hfRevision(v.Source)
		if !commit.MatchString(rev) {
			return nil, fmt.Errorf("source %s: an hf:// source names a commit (hf://ORG/NAME@<40 hex digits>), so that every node serves the same bytes; or set allowBranch: \"true\"", v.Source)
		}
	}
	if strings.HasPrefix(v.Source, "-") {
		return nil, fmt.Errorf("source %q: begins with -", v.Source)
	}
	if o := strings.TrimSpace(attrs[AttrOptions]); o != "" {
		for _, opt := range strings.Split(o, ",") {
			opt = strings.TrimSpace(opt)
			if opt == "" {
				continue
			}
			if err := checkOption(v, opt); err != nil {
				return nil, err
			}
		}
	}
	if m, ok := attrs[AttrMirror]; ok {
		if !IsURL(v.Source) {
			return nil, fmt.Errorf("mirror: the source %s is not a URL (a mirror is of a remote source)", v.Source)
		}
		if !mirrorRe.MatchString(m) {
			return nil, fmt.Errorf("mirror=%q: give s3://BUCKET/PREFIX", m)
		}
		v.Options = append(v.Options, "mirror="+m)
	}
	for k, val := range secrets {
		if !secretKeys[k] {
			return nil, fmt.Errorf("secret key %q is not one stfs takes (HF_TOKEN, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; with a mirror: STFS_MIRROR_AWS_ACCESS_KEY_ID, STFS_MIRROR_AWS_SECRET_ACCESS_KEY, STFS_MIRROR_AWS_SESSION_TOKEN)", k)
		}
		// any control (a CR too): each goes into a header or a
		// signature, where a CR would start another header
		if strings.IndexFunc(val, isControl) >= 0 {
			return nil, fmt.Errorf("secret %s: a control character", k)
		}
		v.Secrets[k] = val
	}
	if err := mirrorKeys(v, attrs[AttrMirror] != ""); err != nil {
		return nil, err
	}
	return v, nil
}

// mirrorKeys: the mirror's keys come with a mirror, both of them; and a
// mirror of a volume whose secret holds the origin's AWS keys has its own
// (else stfs would read the bucket with the origin's keys).
func mirrorKeys(v *Volume, mirror bool) error {
	id := v.Secrets["STFS_MIRROR_AWS_ACCESS_KEY_ID"] != ""
	secret := v.Secrets["STFS_MIRROR_AWS_SECRET_ACCESS_KEY"] != ""
	_, token := v.Secrets["STFS_MIRROR_AWS_SESSION_TOKEN"]
	switch {
	case !mirror && (id || secret || token):
		return fmt.Errorf("secret: STFS_MIRROR_AWS_* keys without a \"mirror\" attribute")
	case id != secret:
		return fmt.Errorf("secret: give STFS_MIRROR_AWS_ACCESS_KEY_ID and STFS_MIRROR_AWS_SECRET_ACCESS_KEY together")
	case mirror && !id && v.Secrets["AWS_ACCESS_KEY_ID"] != "":
		return fmt.Errorf("secret: the origin's AWS keys with a mirror: give the mirror its own (STFS_MIRROR_AWS_ACCESS_KEY_ID, STFS_MIRROR_AWS_SECRET_ACCESS_KEY), so that the origin's keys are never sent to it")
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// Limits: the most a volume may ask of the node's resources through
// its stfs options (the plugin's --max-threads, --max-connections; 0:
// stfs's own maximum).
type Limits struct {
	Threads     int
	Connections int
}

// Check: v's threads= and connections= within l; beyond is an error
// naming the node's maximum (refused, not clamped: the volume's author
// sees why).
func (l Limits) Check(v *Volume) error {
	for _, o := range v.Options {
		name, val, _ := strings.Cut(o, "=")
		most, flag := 0, ""
		switch name {
		case "threads":
			most, flag = l.Threads, "--max-threads"
		case "connections":
			most, flag = l.Connections, "--max-connections"
		default:
			continue
		}
		n, _ := strconv.Atoi(val)
		if most > 0 && n > most {
			return fmt.Errorf("option %q: this node allows at most %s=%d (the plugin's %s)", o, name, most, flag)
		}
	}
	return nil
}

// hfRevision: the REVISION of hf://[KIND/]ORG/NAME@REVISION[/FOLDER], or
// "" (a revision with a slash, refs/pr/1, is never a commit).
func hfRevision(src string) string {
	segs := strings.Split(src[len("hf://"):], "/")
	if len(segs) > 0 && (segs[0] == "datasets" || segs[0] == "spaces" || segs[0] == "models") {
		segs = segs[1:]
	}
	if len(segs) < 2 {
		return ""
	}
	_, rev, _ := strings.Cut(segs[1], "@")
	return rev
}

func checkOption(v *Volume, opt string) error {
	name, val, hasVal := strings.Cut(opt, "=")
	if flagOptions[name] && !hasVal {
		v.Options = append(v.Options, name)
		return nil
	}
	re, ok := valueOptions[name]
	if !ok || !hasVal {
		return fmt.Errorf("option %q: not one a volume may set (see docs/kubernetes.md)", opt)
	}
	if !re.MatchString(val) || strings.Contains(val, ",") {
		return fmt.Errorf("option %q: bad value", opt)
	}
	// stfs's option parser (libfuse's) reads \ooo and \C in a value:
	// a control, a comma would come through the check above, and a
	// glob's \* would reach stfs as *
	if strings.Contains(val, "\\") {
		return fmt.Errorf("option %q: a backslash (stfs would read it as an escape)", opt)
	}
	if name == "readahead" {
		n, _ := strconv.Atoi(val)
		if n < 1 || n > 1048576 {
			return fmt.Errorf("option %q: give 1 to 1048576 (KiB)", opt)
		}
		v.ReadaheadKB = n
		return nil
	}
	v.Options = append(v.Options, opt)
	return nil
}

// IsURL: src names one of stfs's URL schemes, in any case, as stfs reads
// them (src/lib/source/scheme.c); anything else is a path on the node.
func IsURL(src string) bool {
	l := strings.ToLower(src)
	for _, p := range []string{"http://", "https://", "hf://", "s3://"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// within: path is dir or under it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// resolve: p with the symbolic links of its longest existing part
// resolved (what stfs will open, if it exists by then).
func resolve(p string) string {
	rest := ""
	for q := p; ; q = filepath.Dir(q) {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.Join(r, rest)
		}
		if q == filepath.Dir(q) {
			return p
		}
		rest = filepath.Join(filepath.Base(q), rest)
	}
}

// CheckLocal: a source that is a path on the node is served only from
// under localDir ("": from nowhere), as written (absolute, no "..") and
// with its symbolic links resolved, and never from a folder that holds,
// or is inside, one of private (the node cache, the state and the
// launcher's folders): the daemons' user reads every tenant's cached
// blocks there, and a folder's %repo/ shows every file in it.
func CheckLocal(src, localDir string, private ...string) error {
	if IsURL(src) {
		return nil
	}
	if localDir == "" {
		return fmt.Errorf("source %q: a path on the node, and this node serves none (the plugin's --local-dir)", src)
	}
	p := strings.TrimSuffix(src, "/")
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("source %q: a path on the node is absolute, with no \"..\" or \".\" or \"//\"", src)
	}
	paths := []string{p, resolve(p)}
	roots := []string{filepath.Clean(localDir)}
	if r, err := filepath.EvalSymlinks(localDir); err == nil {
		roots = append(roots, r)
	}
	for _, q := range paths {
		in := false
		for _, root := range roots {
			in = in || within(q, root)
		}
		if !in {
			return fmt.Errorf("source %q: not under this node's --local-dir %s", src, localDir)
		}
		for _, dir := range private {
			if dir == "" {
				continue
			}
			dirs := []string{filepath.Clean(dir)}
			if r, err := filepath.EvalSymlinks(dir); err == nil {
				dirs = append(dirs, r)
			}
			for _, pd := range dirs {
				if within(q, pd) || within(pd, q) {
					return fmt.Errorf("source %q: holds or is inside the driver's own folder %s", src, dir)
				}
			}
		}
	}
	return nil
}

// Key names the daemon that serves v: one per (source, options,
// credentials, offline, and policy: the stfs options the node's policy
// adds), so pods with other credentials never share a daemon, an offline
// daemon is never handed to a publish that the origin could check, and
// a daemon started under another policy is never handed to a new one.  It is an HMAC-SHA-256 with nodeKey, the node's
// own random key (accepted.go): the credentials cannot be guessed back
// from it without that key.
func (v *Volume) Key(nodeKey []byte, policy ...string) string {
	h := hmac.New(sha256.New, nodeKey)
	fmt.Fprintf(h, "source\x00%s\x00", v.Source)
	opts := append([]string(nil), v.Options...)
	sort.Strings(opts)
	for _, o := range opts {
		fmt.Fprintf(h, "opt\x00%s\x00", o)
	}
	fmt.Fprintf(h, "readahead\x00%d\x00", v.ReadaheadKB)
	keys := make([]string, 0, len(v.Secrets))
	for k := range v.Secrets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "secret\x00%s\x00%s\x00", k, v.Secrets[k])
	}
	if v.Offline { // only then: the keys of online daemons stay as they were
		fmt.Fprintf(h, "offline\x00")
	}
	for _, o := range policy { // none for hf:// and s3://: as they were
		fmt.Fprintf(h, "policy\x00%s\x00", o)
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}
