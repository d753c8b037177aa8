package metrics

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"golang.org/x/sys/unix"
)

// daemonFile: a plausible daemon's file: counters with labels, a gauge,
// a histogram.
const daemonFile = `# HELP stfs_read_bytes_total Bytes read, by where they came from.
# TYPE stfs_read_bytes_total counter
stfs_read_bytes_total{from="cache"} 4096
stfs_read_bytes_total{from="fetch"} 1048576
# HELP stfs_cache_used_bytes Bytes the cache holds.
# TYPE stfs_cache_used_bytes gauge
stfs_cache_used_bytes 123456
# HELP stfs_fetch_first_byte_seconds Time to the first byte of a fetch.
# TYPE stfs_fetch_first_byte_seconds histogram
stfs_fetch_first_byte_seconds_bucket{le="0.01"} 1
stfs_fetch_first_byte_seconds_bucket{le="0.1"} 3
stfs_fetch_first_byte_seconds_bucket{le="+Inf"} 4
stfs_fetch_first_byte_seconds_sum 0.5
stfs_fetch_first_byte_seconds_count 4
`

type fakeDaemons struct {
	mu sync.Mutex
	ds []Daemon
}

func (f *fakeDaemons) list() []Daemon {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Daemon(nil), f.ds...)
}

// scrape: the text /metrics serves, and its series (sample lines).
func scrape(t *testing.T, s *Set) (string, int) {
	t.Helper()
	fams, err := s.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var b bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, l := range strings.Split(b.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return b.String(), n
}

func TestMerge(t *testing.T) {
	dir := t.TempDir()
	f := &fakeDaemons{ds: []Daemon{
		{Key: "aaaa", Source: "https://user:tok_SECRET@example.com/m.safetensors?X-Amz-Signature=SIG_SECRET#frag", Live: true},
		{Key: "bbbb", Source: "hf://org/repo@main", Live: false},
	}}
	s := newSet(t, dir, 64, f.list)
	if err := os.WriteFile(s.Path("aaaa"), []byte(daemonFile), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := daemonFile + "stfs_csi_publishes_total{result=\"ok\"} 99\nnode_load1 3\n" +
		"stfs_x_total{volume=\"other\"} 1\n"
	if err := os.WriteFile(s.Path("bbbb"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Publish(ResultOK, "", 200*time.Millisecond)
	s.Publish(ResultRefused, "max_daemons", time.Millisecond)
	s.Recovery()
	out, _ := scrape(t, s)
	for _, want := range []string{
		`stfs_read_bytes_total{from="fetch",volume="aaaa"} 1.048576e+06`,
		`stfs_read_bytes_total{from="cache",volume="bbbb"} 4096`,
		`stfs_cache_used_bytes{volume="aaaa"} 123456`,
		`stfs_fetch_first_byte_seconds_bucket{volume="aaaa",le="0.1"} 3`,
		`stfs_fetch_first_byte_seconds_count{volume="bbbb"} 4`,
		`stfs_csi_volume_info{source="https://example.com/m.safetensors",volume="aaaa"} 1`,
		`stfs_csi_volume_info{source="hf://org/repo@main",volume="bbbb"} 1`,
		`stfs_csi_publishes_total{result="ok"} 1`,
		`stfs_csi_publishes_total{result="refused"} 1`,
		`stfs_csi_refusals_total{reason="max_daemons"} 1`,
		`stfs_csi_recoveries_total 1`,
		`stfs_csi_daemons 1`,
		`stfs_csi_publish_duration_seconds_count 2`,
		`stfs_csi_daemon_metrics_dropped_total{reason="foreign_name"} 2`,
		`stfs_csi_daemon_metrics_dropped_total{reason="bad_sample"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
	for _, no := range []string{"SECRET", "frag", "node_load1", `"ok"} 99`, `volume="other"`} {
		if strings.Contains(out, no) {
			t.Errorf("%q in the output", no)
		}
	}
	// a daemon gone: its series go
	f.mu.Lock()
	f.ds = f.ds[:1]
	f.mu.Unlock()
	out, _ = scrape(t, s)
	if strings.Contains(out, `volume="bbbb"`) {
		t.Errorf("a daemon gone still shows")
	}
}

// series builds a daemon file of exactly n series.
func series(n int) string {
	var b strings.Builder
	b.WriteString("# TYPE stfs_c_total counter\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "stfs_c_total{n=\"%d\"} %d\n", i, i)
	}
	return b.String()
}

// PluginSeries bounds the plugin's own series (docs/kubernetes.md).
const PluginSeries = 200

// TestBound: 64 daemons at the most a daemon may write stay under the
// bound the docs state: PluginSeries + max-daemons * (MaxSeriesPerDaemon + 1);
// a file beyond MaxSeriesPerDaemon or MaxFileBytes is dropped whole.
func TestBound(t *testing.T) {
	dir := t.TempDir()
	f := &fakeDaemons{}
	s := newSet(t, dir, 64, f.list)
	_, own := scrape(t, s)
	t.Logf("the plugin alone: %d series", own)
	if own > PluginSeries {
		t.Fatalf("the plugin alone has %d series > %d", own, PluginSeries)
	}
	for i := 0; i < 64; i++ {
		k := fmt.Sprintf("k%02d", i)
		f.ds = append(f.ds, Daemon{Key: k, Source: "/models/m", Live: true})
		if err := os.WriteFile(s.Path(k), []byte(series(MaxSeriesPerDaemon)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, n := scrape(t, s)
	bound := PluginSeries + 64*(MaxSeriesPerDaemon+1)
	if n > bound || n < 64*(MaxSeriesPerDaemon+1) {
		t.Fatalf("64 full daemons: %d series, bound %d", n, bound)
	}
	t.Logf("64 daemons of %d series: %d series in all (bound %d)", MaxSeriesPerDaemon, n, bound)
	// more daemons than --max-daemons (cannot happen): still bounded
	f.ds = append(f.ds, Daemon{Key: "zz", Source: "/m", Live: true})
	os.WriteFile(s.Path("zz"), []byte(series(10)), 0o600)
	if _, n2 := scrape(t, s); n2 > bound {
		t.Fatalf("65 daemons: %d series > %d", n2, bound)
	}
	os.WriteFile(s.Path("k00"), []byte(series(MaxSeriesPerDaemon+1)), 0o600)
	big := strings.Repeat("# "+strings.Repeat("x", 1000)+"\n", MaxFileBytes/1000)
	os.WriteFile(s.Path("k01"), []byte(big), 0o600)
	out, _ := scrape(t, s)
	for _, want := range []string{
		`stfs_csi_daemon_metrics_dropped_total{reason="too_many_series"} 1`,
		`stfs_csi_daemon_metrics_dropped_total{reason="too_large"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(out, `volume="k00"}`) && strings.Contains(out, `stfs_c_total{n="0",volume="k00"}`) {
		t.Errorf("a file over the bound was kept")
	}
}

func TestNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	f := &fakeDaemons{ds: []Daemon{{Key: "l", Source: "/m"}, {Key: "p", Source: "/m"}}}
	s := newSet(t, dir, 4, f.list)
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("stfs_secret_total 42\n"), 0o600)
	if err := os.Symlink(secret, s.Path("l")); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(s.Path("p")); err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	go func() { out, _ := scrape(t, s); done <- out }()
	select {
	case out := <-done:
		if strings.Contains(out, "stfs_secret_total") {
			t.Errorf("a symbolic link was followed")
		}
		if !strings.Contains(out, `stfs_csi_daemon_metrics_dropped_total{reason="not_a_file"} 2`) {
			t.Errorf("not counted:\n%s", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO blocked the scrape")
	}
}

func TestParseChecks(t *testing.T) {
	for _, c := range []struct {
		in      string
		samples int
		err     string
	}{
		{"stfs_a 1\n", 1, ""},
		{"stfs_a{x=\"" + strings.Repeat("v", maxLabelValue+1) + "\"} 1\n", 0, ""},
		{"# TYPE stfs_c counter\nstfs_c -1\n", 0, ""},
		{"stfs_a{le=\"1\"} 1\n", 0, ""},
		{"stfs_a{__name__=\"x\"} 1\n", 0, "parse_error"},
		{"stfs_a 1\nstfs_a 2\n", 1, ""},
		{"stfs_a{x=\"1\"} 1\nstfs_a{x=\"1\"} 2\n", 1, ""},
		{"# TYPE stfs_h histogram\nstfs_h_bucket{le=\"1\"} 5\nstfs_h_bucket{le=\"+Inf\"} 3\nstfs_h_count 3\nstfs_h_sum 1\n", 0, ""},
		{"# TYPE stfs_s summary\nstfs_s{quantile=\"0.5\"} 1\nstfs_s_count 1\nstfs_s_sum 1\n", 0, ""},
		{"\xff\n", 0, "parse_error"},
		{"garbage garbage\n", 0, "parse_error"},
	} {
		s, _, err := Parse([]byte(c.in))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err && !(c.err == "parse_error" && got == "parse_error") {
			t.Errorf("%q: error %q, want %q", c.in, got, c.err)
		}
		if err == nil && len(s) != c.samples {
			t.Errorf("%q: %d samples, want %d", c.in, len(s), c.samples)
		}
	}
}

func TestSafeSource(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@h.example/a/b?sig=1#f": "https://h.example/a/b",
		"s3://bucket/key?versionId=3":       "s3://bucket/key",
		"hf://org/repo@v1":                  "hf://org/repo@v1",
		"/models/llama":                     "/models/llama",
		"https://h/%zz":                     "https://(unparsable)",
		strings.Repeat("x", 300):            strings.Repeat("x", 200),
	} {
		if got := SafeSource(in); got != want {
			t.Errorf("SafeSource(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNil(t *testing.T) {
	var s *Set
	s.Publish(ResultOK, "", time.Second)
	s.Recovery()
}

// newSet: a Set on dir, opened as the driver opens it.
func newSet(tb testing.TB, dir string, max int, daemons func() []Daemon) *Set {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	return New(dir, fd, max, daemons)
}

func mkfifo(p string) error { return unix.Mkfifo(p, 0o600) }
