package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseVolume(t *testing.T) {
	commit := "hf://org/m@0123456789abcdef0123456789abcdef01234567"
	ok := []map[string]string{
		{"source": "/models/m.safetensors"},
		{"source": commit},
		{"source": "hf://datasets/org/d@0123456789abcdef0123456789abcdef01234567/sub"},
		{"source": "hf://org/m", "allowBranch": "true"},
		{"source": "s3://bucket/prefix/", "options": "repo, files=*.json,include=model.*,readahead=8192,block_size=8M,s3_style=path"},
		{"source": "/m", "csi.storage.k8s.io/pod.name": "p", "csi.storage.k8s.io/ephemeral": "true"},
		{"source": commit, "allowOfflineCache": "true"},
		{"source": commit, "allowOfflineCache": "false"},
		{"source": commit, "mirror": "s3://models/m-0123456"},
		{"source": "s3://bucket/prefix/", "mirror": "s3://in-cluster.bucket"},
	}
	for _, a := range ok {
		if _, err := ParseVolume(a, nil); err != nil {
			t.Errorf("%v: %v", a, err)
		}
	}
	bad := map[string]map[string]string{
		"names a commit":        {"source": "hf://org/m"},
		"names a commit ":       {"source": "hf://org/m@main"},
		"names a commit  ":      {"source": "hf://org/m@0123456789ABCDEF0123456789abcdef01234567"},
		"allowBranch":           {"source": "hf://org/m", "allowBranch": "yes please"},
		"not one a volume may":  {"source": "/m", "options": "cache=/tmp"},
		"not one a volume may ": {"source": "/m", "options": "uid=0"},
		"bad value":             {"source": "/m", "options": "threads=-1"},
		"1 to 1048576":          {"source": "/m", "options": "readahead=0"},
		"unknown volume":        {"source": "/m", "mode": "rw"},
		"is missing":            {},
		"begins with -":         {"source": "-o"},
		"allowOfflineCache":     {"source": "/m", "allowOfflineCache": "yes"},
		"allowOfflineCache ":    {"source": "/m", "allowOfflineCache": "TRUE"},
		"allowOfflineCache  ":   {"source": "/m", "allowOfflineCache": "1"},
		"allowOfflineCache   ":  {"source": "/m", "allowOfflineCache": ""},
		"allowOfflineCache    ": {"source": "/m", "allowofflinecache": "true"},
		// stfs reads HF:// as hf://: the commit rule holds for it too
		"names a commit   ": {"source": "HF://org/m@main"},
		// a control in the source would reach the daemon's log lines
		// and the publish's error (a CR, an escape) as written
		"source: a control": {"source": "http://example.com/m\r\x1b[2Jx"},
		// stfs's option parser (libfuse's) reads \ooo and \C in a
		// value: a newline, a comma or any control would come through
		// the check, and a glob's \* would not reach stfs as written
		"a backslash":  {"source": "/m", "options": "prefetch=a\\012#1"},
		"a backslash ": {"source": "/m", "options": "include=\\054x"},
		// a mirror: of a remote source only, an s3:// prefix, nothing
		// stfs's option parser would read otherwise
		"is not a URL":                {"source": "/m", "mirror": "s3://models/m"},
		"give s3://BUCKET/PREFIX":     {"source": commit, "mirror": "http://models/m"},
		"give s3://BUCKET/PREFIX ":    {"source": commit, "mirror": "s3://models/m,nocache"},
		"give s3://BUCKET/PREFIX  ":   {"source": commit, "mirror": "s3://models/m\\054x"},
		"give s3://BUCKET/PREFIX   ":  {"source": commit, "mirror": "s3://Models/m"},
		"give s3://BUCKET/PREFIX    ": {"source": commit, "mirror": "s3://models/m\n"},
	}
	for want, a := range bad {
		_, err := ParseVolume(a, nil)
		if err == nil || !strings.Contains(err.Error(), strings.TrimSpace(want)) {
			t.Errorf("%v: %v, want %q", a, err, want)
		}
	}
	_, err := ParseVolume(map[string]string{"source": "/m"}, map[string]string{"LD_PRELOAD": "secret-value"})
	if err == nil || strings.Contains(err.Error(), "secret-value") {
		t.Errorf("secret key: %v", err)
	}
	// a CR (or any control) would start another header after the token
	for _, v := range []string{"tok\rX-Evil: 1", "tok\tx", "tok\x7f"} {
		_, err = ParseVolume(map[string]string{"source": "/m"}, map[string]string{"AWS_SESSION_TOKEN": v})
		if err == nil || !strings.Contains(err.Error(), "control character") || strings.Contains(err.Error(), v) {
			t.Errorf("secret %q: %v", v, err)
		}
	}
}

func TestMirror(t *testing.T) {
	src := "hf://org/m@0123456789abcdef0123456789abcdef01234567"
	v, err := ParseVolume(map[string]string{"source": src, "options": "repo", "mirror": "s3://models/m"}, nil)
	if err != nil || strings.Join(v.Options, ",") != "repo,mirror=s3://models/m" {
		t.Fatalf("%+v %v", v, err)
	}
	// another mirror is another daemon
	w, _ := ParseVolume(map[string]string{"source": src, "options": "repo"}, nil)
	if v.Key([]byte("k")) == w.Key([]byte("k")) {
		t.Errorf("the mirror is not in the key")
	}
}

func TestMirrorKeys(t *testing.T) {
	src := "s3://origin/p/"
	m := map[string]string{"source": src, "mirror": "s3://models/m"}
	mk := map[string]string{"STFS_MIRROR_AWS_ACCESS_KEY_ID": "AKID", "STFS_MIRROR_AWS_SECRET_ACCESS_KEY": "s"}
	origin := map[string]string{"AWS_ACCESS_KEY_ID": "OKID", "AWS_SECRET_ACCESS_KEY": "o"}
	both := map[string]string{}
	for k, v := range mk {
		both[k] = v
	}
	for k, v := range origin {
		both[k] = v
	}
	for _, ok := range []map[string]string{nil, mk, both} {
		if _, err := ParseVolume(m, ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for why, bad := range map[string]struct {
		attrs, secrets map[string]string
	}{
		"without a \"mirror\"":    {map[string]string{"source": src}, mk},
		"together":                {m, map[string]string{"STFS_MIRROR_AWS_ACCESS_KEY_ID": "AKID"}},
		"together ":               {m, map[string]string{"STFS_MIRROR_AWS_SECRET_ACCESS_KEY": "s"}},
		"give the mirror its own": {m, origin},
		"is not one stfs takes":   {m, map[string]string{"MIRROR_AWS_ACCESS_KEY_ID": "x"}},
	} {
		_, err := ParseVolume(bad.attrs, bad.secrets)
		if err == nil || !strings.Contains(err.Error(), strings.TrimSpace(why)) {
			t.Errorf("%s: %v", why, err)
		}
		if err != nil && strings.Contains(err.Error(), "AKID") {
			t.Errorf("a key in the error: %v", err)
		}
	}
}

func TestAllowOfflineCache(t *testing.T) {
	src := "hf://org/m@0123456789abcdef0123456789abcdef01234567"
	for val, want := range map[string]bool{"true": true, "false": false} {
		v, err := ParseVolume(map[string]string{"source": src, "allowOfflineCache": val}, nil)
		if err != nil || v.AllowOfflineCache != want || v.Offline {
			t.Errorf("%s: %+v %v", val, v, err)
		}
	}
	v, _ := ParseVolume(map[string]string{"source": src}, map[string]string{"HF_TOKEN": "x"})
	if v.AllowOfflineCache || v.Offline {
		t.Errorf("the default: %+v", v)
	}
	// allowOfflineCache alone names the same daemon (an online one is the
	// same either way); offline names another
	a, _ := ParseVolume(map[string]string{"source": src, "allowOfflineCache": "true"}, map[string]string{"HF_TOKEN": "x"})
	if a.Key(testKey) != v.Key(testKey) {
		t.Error("allowOfflineCache changed the key")
	}
	o := a.offline()
	if o.Key(testKey) == a.Key(testKey) || !o.Offline || a.Offline {
		t.Error("an offline daemon shares the online one's key")
	}
	if o.Key(testKey) != v.offline().Key(testKey) {
		t.Error("two keys for one offline daemon")
	}
	// a pod cannot ask for offline through its options
	if _, err := ParseVolume(map[string]string{"source": src, "options": "offline"}, nil); err == nil {
		t.Error("options: offline accepted")
	}
}

func TestKey(t *testing.T) {
	a, _ := ParseVolume(map[string]string{"source": "/m", "options": "npy,flat"}, map[string]string{"HF_TOKEN": "x"})
	b, _ := ParseVolume(map[string]string{"source": "/m", "options": "flat,npy", "csi.storage.k8s.io/pod.name": "p"}, map[string]string{"HF_TOKEN": "x"})
	c, _ := ParseVolume(map[string]string{"source": "/m", "options": "flat,npy"}, map[string]string{"HF_TOKEN": "y"})
	d, _ := ParseVolume(map[string]string{"source": "/m", "options": "flat"}, map[string]string{"HF_TOKEN": "x"})
	if a.Key(testKey) != b.Key(testKey) {
		t.Error("the same volume, two keys")
	}
	if a.Key(testKey) == c.Key(testKey) || a.Key(testKey) == d.Key(testKey) {
		t.Error("other credentials or options, one key")
	}
	if len(a.Key(testKey)) != 20 {
		t.Error(a.Key(testKey))
	}
}

// FuzzParseVolume: any attributes and secrets give a volume or an error,
// never a panic, and no error names a secret's value.  `go test -fuzz
// FuzzParseVolume ./internal/driver` fuzzes; go test runs the seeds.
func FuzzParseVolume(f *testing.F) {
	f.Add("hf://org/m@0123456789abcdef0123456789abcdef01234567", "repo,files=*.json", "false", "HF_TOKEN", "hf_secret_value")
	f.Add("/m", "readahead=99999999,include=\x01", "maybe", "AWS_SECRET_ACCESS_KEY", "s3cr3t\n")
	f.Add("-o", ",,=,", "", "X", "v")
	f.Fuzz(func(t *testing.T, src, opts, branch, key, val string) {
		v, err := ParseVolume(map[string]string{"source": src, "options": opts, "allowBranch": branch},
			map[string]string{key: val})
		if err != nil {
			if len(val) >= 4 && strings.Contains(err.Error(), val) && !strings.Contains(src+opts+branch+key, val) {
				t.Fatalf("the error shows the secret: %v", err)
			}
			return
		}
		if v.Source != src || len(v.Key(testKey)) != 20 {
			t.Fatalf("%+v", v)
		}
		for _, o := range v.Options {
			if strings.ContainsAny(o, ",\x00\n") {
				t.Fatalf("option %q", o)
			}
		}
	})
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

// TestCheckLocal: a path on the node only under --local-dir, never the
// node cache (every tenant's blocks, readable by the daemons' user) or a
// folder above it, nor through "..", nor through a symbolic link.
func TestCheckLocal(t *testing.T) {
	d := t.TempDir()
	local, cache := filepath.Join(d, "models"), filepath.Join(d, "models", "cache")
	for _, p := range []string{local, cache, filepath.Join(d, "state"), filepath.Join(local, "m")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(cache, filepath.Join(local, "link")); err != nil {
		t.Fatal(err)
	}
	private := []string{cache, filepath.Join(d, "state")}
	for _, src := range []string{filepath.Join(local, "m"), filepath.Join(local, "m") + "/",
		filepath.Join(local, "none.safetensors"), "s3://b/k", "HTTPS://h/x.safetensors"} {
		if err := CheckLocal(src, local, private...); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
	bad := map[string]string{
		cache:                               "driver's own folder",
		cache + "/x":                        "driver's own folder",
		local:                               "driver's own folder", // holds the cache
		filepath.Join(local, "link"):        "driver's own folder",
		filepath.Join(d, "state"):           "not under",
		"/etc":                              "not under",
		local + "/m/../cache":               "no \"..\"",
		"models/m":                          "absolute",
		filepath.Join(local, "link") + "/x": "driver's own folder",
	}
	for src, want := range bad {
		err := CheckLocal(src, local, private...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
	if err := CheckLocal(filepath.Join(local, "m"), "", private...); err == nil || !strings.Contains(err.Error(), "--local-dir") {
		t.Errorf("no --local-dir: %v", err)
	}
}
