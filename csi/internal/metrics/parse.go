// parse.go: a daemon's metrics file (`stfs -o metrics=PATH`, the
// Prometheus text format) read as untrusted input: at most MaxFileBytes,
// at most MaxSeriesPerDaemon series, only `stfs_` names (never the
// plugin's own `stfs_csi_`), label names and values checked and bounded,
// no label `volume` (the plugin adds it).  What fails a check is dropped
// and counted by reason; a file over a bound is dropped whole.
package metrics

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
)

const (
	// MaxFileBytes: a daemon's file larger than this is dropped whole.
	MaxFileBytes = 1 << 20
	// MaxSeriesPerDaemon: a daemon's file with more series (a histogram
	// counts its buckets, +Inf, _sum and _count) is dropped whole.
	MaxSeriesPerDaemon = 500
	maxLabelValue      = 128 // bytes of a label value
	maxLabels          = 8   // labels of one sample
	maxHelp            = 256 // bytes of a HELP text kept
)

var (
	daemonName = regexp.MustCompile(`^stfs_[a-z0-9_]{1,120}$`)
	labelName  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,40}$`)
)

// Sample is one checked series of a daemon (a histogram is one Sample).
type Sample struct {
	Name   string
	Help   string
	Type   dto.MetricType
	Labels []string // names, sorted
	Values []string // in the order of Labels
	Value  float64  // counter, gauge, untyped
	// histogram
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64 // upper bound (finite) -> cumulative count
}

// errTooLarge, errTooMany: a file dropped whole.
var (
	errTooLarge = errors.New("too_large")
	errTooMany  = errors.New("too_many_series")
	errParse    = errors.New("parse_error")
	errNotFile  = errors.New("not_a_file")
)

// readFile reads name in the folder dirFD (a regular file, not followed
// through a symbolic link, never a FIFO that would block) up to
// MaxFileBytes.
func readFile(dirFD int, name string) ([]byte, error) {
	fd, err := unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, errNotFile
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errNotFile
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, errTooLarge
	}
	return b, nil
}

// Parse checks a daemon's file: its samples, and the number of samples
// dropped by reason.  A non-nil error drops the file whole (its name is
// the reason).
func Parse(b []byte) ([]Sample, map[string]int, error) {
	if len(b) > MaxFileBytes {
		return nil, nil, errTooLarge
	}
	if !utf8.Valid(b) {
		return nil, nil, errParse
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, nil, errParse
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	dropped := map[string]int{}
	var out []Sample
	series := 0
	seen := map[string]bool{}
	for _, n := range names {
		f := fams[n]
		if !daemonName.MatchString(n) || len(n) >= 9 && n[:9] == "stfs_csi_" {
			dropped["foreign_name"] += len(f.GetMetric())
			continue
		}
		help := f.GetHelp()
		if len(help) > maxHelp || !utf8.ValidString(help) {
			help = ""
		}
		for _, m := range f.GetMetric() {
			s, ok := sample(n, help, f.GetType(), m)
			if !ok {
				dropped["bad_sample"]++
				continue
			}
			sig := n + "\xff" + join(s.Labels) + "\xff" + join(s.Values)
			if seen[sig] {
				dropped["duplicate"]++
				continue
			}
			seen[sig] = true
			series += s.series()
			if series > MaxSeriesPerDaemon {
				return nil, nil, errTooMany
			}
			out = append(out, s)
		}
	}
	return out, dropped, nil
}

func join(ss []string) string {
	var b bytes.Buffer
	for _, s := range ss {
		b.WriteString(s)
		b.WriteByte(0)
	}
	return b.String()
}

// series: how many series s is in the output.
func (s *Sample) series() int {
	if s.Type == dto.MetricType_HISTOGRAM {
		return len(s.Buckets) + 3
	}
	return 1
}

// sample checks one metric of family n.
func sample(n, help string, t dto.MetricType, m *dto.Metric) (Sample, bool) {
	s := Sample{Name: n, Help: help, Type: t}
	lp := m.GetLabel()
	if len(lp) > maxLabels {
		return s, false
	}
	sort.Slice(lp, func(i, j int) bool { return lp[i].GetName() < lp[j].GetName() })
	for i, l := range lp {
		ln, lv := l.GetName(), l.GetValue()
		if !labelName.MatchString(ln) || ln == "volume" || ln == "le" || ln == "quantile" ||
			(i > 0 && lp[i-1].GetName() == ln) ||
			len(lv) > maxLabelValue || !utf8.ValidString(lv) {
			return s, false
		}
		s.Labels = append(s.Labels, ln)
		s.Values = append(s.Values, lv)
	}
	switch t {
	case dto.MetricType_COUNTER:
		s.Value = m.GetCounter().GetValue()
		return s, s.Value >= 0 && !math.IsInf(s.Value, 0)
	case dto.MetricType_GAUGE:
		s.Value = m.GetGauge().GetValue()
		return s, !math.IsNaN(s.Value)
	case dto.MetricType_UNTYPED:
		s.Value = m.GetUntyped().GetValue()
		return s, !math.IsNaN(s.Value)
	case dto.MetricType_HISTOGRAM:
		return histogram(s, m.GetHistogram())
	}
	return s, false // summaries and the rest: no daemon writes them
}

// histogram: cumulative buckets that never decrease and end at the count.
func histogram(s Sample, h *dto.Histogram) (Sample, bool) {
	s.Count, s.Sum = h.GetSampleCount(), h.GetSampleSum()
	s.Buckets = map[float64]uint64{}
	if math.IsNaN(s.Sum) || len(h.GetBucket()) > MaxSeriesPerDaemon {
		return s, false
	}
	bs := h.GetBucket()
	sort.Slice(bs, func(i, j int) bool { return bs[i].GetUpperBound() < bs[j].GetUpperBound() })
	var last uint64
	for i, b := range bs {
		ub, c := b.GetUpperBound(), b.GetCumulativeCount()
		if math.IsNaN(ub) || c < last || (i > 0 && bs[i-1].GetUpperBound() == ub) {
			return s, false
		}
		last = c
		if math.IsInf(ub, 1) {
			if c != s.Count {
				return s, false
			}
			continue
		}
		s.Buckets[ub] = c
	}
	return s, last <= s.Count
}
