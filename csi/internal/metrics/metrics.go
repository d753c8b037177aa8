// Package metrics is the plugin's /metrics (--metrics-address): its own
// counters (publishes by result, refusals by reason, recoveries, daemons,
// publish latency) and, merged under a `volume` label (the daemon's key),
// the counters each of its stfs daemons writes to its file (`-o
// metrics=DIR/KEY.prom`), read at each scrape.  The series are bounded:
// at most MaxSeriesPerDaemon per daemon, at most --max-daemons daemons,
// and the plugin's own set is fixed (docs/kubernetes.md, "Metrics").
package metrics

import (
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
)

// Daemon is what the plugin tells of one of its daemons.
type Daemon struct {
	Key    string // the daemon's key: the `volume` label
	Source string // its source (credentials are stripped here)
	Live   bool   // serving (not starting, not being recovered)
}

// Set is the plugin's registry.  A nil *Set counts nothing.
type Set struct {
	reg        *prometheus.Registry
	dir        string
	dirFD      int // dir, opened without following a link: files are read through it
	max        int
	daemons    func() []Daemon
	publishes  *prometheus.CounterVec
	refusals   *prometheus.CounterVec
	recoveries prometheus.Counter
	latency    prometheus.Histogram
	dropped    *prometheus.CounterVec
	mu         sync.Mutex // one scrape reads the files at a time
}

// Publish results and refusal reasons: fixed sets.
const (
	ResultOK      = "ok"
	ResultRefused = "refused"
	ResultTimeout = "timeout"
	ResultError   = "error"
)

// New makes the registry: dir holds the daemons' files (dirFD is it,
// opened; the Set owns it), max is --max-daemons (0: no limit), daemons
// lists the plugin's daemons.
func New(dir string, dirFD int, max int, daemons func() []Daemon) *Set {
	s := &Set{reg: prometheus.NewRegistry(), dir: dir, dirFD: dirFD, max: max, daemons: daemons}
	s.publishes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stfs_csi_publishes_total",
		Help: "NodePublishVolume calls by result: ok, refused (see stfs_csi_refusals_total), timeout, error.",
	}, []string{"result"})
	s.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stfs_csi_refusals_total",
		Help: "Publishes refused, by reason: invalid_request, host_not_allowed, target_in_use, max_daemons, offline_refused, source_refused.",
	}, []string{"reason"})
	s.recoveries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "stfs_csi_recoveries_total",
		Help: "Daemons that died with pods reading and were mounted again.",
	})
	s.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "stfs_csi_publish_duration_seconds",
		Help:    "Time NodePublishVolume took, whatever its result.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	})
	s.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "stfs_csi_daemon_metrics_dropped_total",
		Help: "Parts of the daemons' metrics files dropped when read, by reason (a whole file: too_large, too_many_series, parse_error, not_a_file, unreadable; a sample: foreign_name, bad_sample, duplicate, inconsistent).",
	}, []string{"reason"})
	live := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "stfs_csi_daemons",
		Help: "stfs daemons of this node serving now.",
	}, func() float64 {
		n := 0
		for _, d := range s.daemons() {
			if d.Live {
				n++
			}
		}
		return float64(n)
	})
	maxG := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "stfs_csi_max_daemons",
		Help: "The plugin's --max-daemons (0: no limit).",
	})
	maxG.Set(float64(max))
	s.reg.MustRegister(s.publishes, s.refusals, s.recoveries, s.latency, live, maxG,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		(*merged)(s))
	for _, r := range []string{ResultOK, ResultRefused, ResultTimeout, ResultError} {
		s.publishes.WithLabelValues(r)
	}
	return s
}

// Path is where the daemon key writes its metrics.
func (s *Set) Path(key string) string {
	return filepath.Join(s.dir, key+".prom")
}

// Remove removes the file of the daemon key (stopped, or starting again).
func (s *Set) Remove(key string) {
	unix.Unlinkat(s.dirFD, key+".prom", 0)
}

// Prune removes every file of the folder but those of the keys keep
// wants (a previous run's daemons, stopped meanwhile).
func (s *Set) Prune(keep func(key string) bool) {
	fd, err := unix.Openat(s.dirFD, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), s.dir)
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	for _, n := range names {
		if !strings.HasSuffix(n, ".prom") || !keep(strings.TrimSuffix(n, ".prom")) {
			unix.Unlinkat(s.dirFD, n, 0)
		}
	}
}

// Handler serves the registry.
func (s *Set) Handler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             20 * time.Second,
	})
}

// Gather: the registry's families (for tests).
func (s *Set) Gather() ([]*dto.MetricFamily, error) { return s.reg.Gather() }

// Publish counts one NodePublishVolume: its result, the reason of a
// refusal, and how long it took.
func (s *Set) Publish(result, reason string, d time.Duration) {
	if s == nil {
		return
	}
	s.publishes.WithLabelValues(result).Inc()
	if result == ResultRefused {
		s.refusals.WithLabelValues(reason).Inc()
	}
	s.latency.Observe(d.Seconds())
}

// Recovery counts one daemon mounted again after it died.
func (s *Set) Recovery() {
	if s != nil {
		s.recoveries.Inc()
	}
}

// SafeSource is source as the info metric shows it: no user
// information, query or fragment (where credentials could be), at most
// 200 bytes of valid UTF-8.
func SafeSource(source string) string {
	out := source
	if i := strings.Index(source, "://"); i > 0 {
		u, err := url.Parse(source)
		if err != nil {
			out = source[:i] + "://(unparsable)"
		} else {
			u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
			out = u.String()
		}
	}
	out = strings.ToValidUTF8(out, "?")
	if len(out) > 200 {
		out = strings.ToValidUTF8(out[:200], "")
	}
	return out
}

// merged is the collector of the daemons' files and the volume info.
type merged Set

var infoDesc = prometheus.NewDesc("stfs_csi_volume_info",
	"One per daemon: its volume label (the daemon's key) and its source, without credentials.",
	[]string{"volume", "source"}, nil)

// Describe sends nothing: the daemons' families are known at a scrape.
func (m *merged) Describe(chan<- *prometheus.Desc) {}

// family: the first shape a scrape saw of a name; a daemon's sample of
// another shape is dropped (the registry wants one per name).
type family struct {
	desc   *prometheus.Desc
	typ    dto.MetricType
	labels string
}

// Collect reads each daemon's file and sends its samples with volume.
func (m *merged) Collect(ch chan<- prometheus.Metric) {
	s := (*Set)(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	ds := s.daemons()
	sort.Slice(ds, func(i, j int) bool { return ds[i].Key < ds[j].Key })
	if s.max > 0 && len(ds) > s.max {
		ds = ds[:s.max]
	}
	fams := map[string]*family{}
	defer s.dropped.Collect(ch) // with what this scrape dropped
	for _, d := range ds {
		ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, d.Key, SafeSource(d.Source))
		b, err := readFile(s.dirFD, d.Key+".prom")
		if err != nil {
			if err == errTooLarge || err == errNotFile {
				s.dropped.WithLabelValues(err.Error()).Inc()
			} else if !isNotExist(err) {
				s.dropped.WithLabelValues("unreadable").Inc()
			}
			continue
		}
		samples, dropped, err := Parse(b)
		if err != nil {
			s.dropped.WithLabelValues(err.Error()).Inc()
			continue
		}
		for r, n := range dropped {
			s.dropped.WithLabelValues(r).Add(float64(n))
		}
		for i := range samples {
			if !emit(ch, fams, &samples[i], d.Key) {
				s.dropped.WithLabelValues("inconsistent").Inc()
			}
		}
	}
}

// emit sends x with volume=key, if its shape is its name's in this scrape.
func emit(ch chan<- prometheus.Metric, fams map[string]*family, x *Sample, key string) bool {
	shape := strings.Join(x.Labels, ",")
	f := fams[x.Name]
	if f == nil {
		f = &family{prometheus.NewDesc(x.Name, x.Help, append(append([]string(nil), x.Labels...), "volume"), nil),
			x.Type, shape}
		fams[x.Name] = f
	}
	if f.typ != x.Type || f.labels != shape {
		return false
	}
	vals := append(append([]string(nil), x.Values...), key)
	var (
		pm  prometheus.Metric
		err error
	)
	switch x.Type {
	case dto.MetricType_COUNTER:
		pm, err = prometheus.NewConstMetric(f.desc, prometheus.CounterValue, x.Value, vals...)
	case dto.MetricType_GAUGE:
		pm, err = prometheus.NewConstMetric(f.desc, prometheus.GaugeValue, x.Value, vals...)
	case dto.MetricType_UNTYPED:
		pm, err = prometheus.NewConstMetric(f.desc, prometheus.UntypedValue, x.Value, vals...)
	case dto.MetricType_HISTOGRAM:
		pm, err = prometheus.NewConstHistogram(f.desc, x.Count, x.Sum, x.Buckets, vals...)
	default:
		return false
	}
	if err != nil {
		return false
	}
	ch <- pm
	return true
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
