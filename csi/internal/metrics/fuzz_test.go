package metrics

import (
	"os"
	"strings"
	"testing"
)

// FuzzDaemonFile: whatever a daemon writes, Parse neither panics nor keeps
// a foreign name, an over-long label value or more than the bound; the
// scrape of it serves only stfs_ names, never panics, and its series stay
// under PluginSeries + MaxSeriesPerDaemon + 1.
func FuzzDaemonFile(f *testing.F) {
	f.Add([]byte(daemonFile))
	f.Add([]byte(series(3)))
	f.Add([]byte("# TYPE stfs_h histogram\nstfs_h_bucket{le=\"1\"} 1\nstfs_h_bucket{le=\"+Inf\"} 2\nstfs_h_count 2\nstfs_h_sum 3\nstfs_h_count 1\n"))
	f.Add([]byte("# TYPE stfs_x counter\nstfs_x_total 1\nstfs_x_count 2\n# TYPE stfs_y gauge\nstfs_y{a=\"\\n\"} NaN\n"))
	dir := f.TempDir()
	set := newSet(f, dir, 2, func() []Daemon { return []Daemon{{Key: "k", Source: "/m"}} })
	f.Fuzz(func(t *testing.T, b []byte) {
		samples, _, err := Parse(b)
		if err == nil {
			n := 0
			for _, s := range samples {
				if !strings.HasPrefix(s.Name, "stfs_") || strings.HasPrefix(s.Name, "stfs_csi_") {
					t.Fatalf("kept %q", s.Name)
				}
				for i, l := range s.Labels {
					if l == "volume" || len(s.Values[i]) > maxLabelValue {
						t.Fatalf("kept label %q=%q", l, s.Values[i])
					}
				}
				n += s.series()
			}
			if n > MaxSeriesPerDaemon {
				t.Fatalf("%d series", n)
			}
		}
		if err := os.WriteFile(set.Path("k"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		fams, _ := set.Gather() // errors (name collisions) drop a metric, not the scrape
		total := 0
		for _, fm := range fams {
			name := fm.GetName()
			if !strings.HasPrefix(name, "stfs_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
				t.Fatalf("served %q", name)
			}
			for _, m := range fm.GetMetric() {
				if h := m.GetHistogram(); h != nil {
					total += len(h.GetBucket()) + 2
				} else {
					total++
				}
			}
		}
		if total > PluginSeries+MaxSeriesPerDaemon+1 {
			t.Fatalf("%d series", total)
		}
	})
}
