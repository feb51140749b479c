package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// SLO is one latency target of --goodput: a request meets it when its metric is at most Ms.
type SLO struct {
	Metric string  // "ttft" | "tpot" | "e2el"
	Ms     float64 // the target in milliseconds, >= 0
}

// sloMetrics are the keys --goodput takes, as vLLM's `bench serve --goodput` names them.
var sloMetrics = []string{"ttft", "tpot", "e2el"}

// ParseGoodput parses --goodput's "ttft:MS,tpot:MS,e2el:MS" (any non-empty subset, in any order).
// Errors name the flag and the bad pair and wrap ErrBadConfig.
func ParseGoodput(s string) ([]SLO, error) {
	bad := func(format string, args ...any) error {
		return &ConfigError{msg: "--goodput: " + fmt.Sprintf(format, args...)}
	}
	if strings.TrimSpace(s) == "" {
		return nil, bad("empty (want KEY:MS pairs, e.g. ttft:200,tpot:50; keys %s)", strings.Join(sloMetrics, ", "))
	}
	var out []SLO
	for _, pair := range strings.Split(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok {
			return nil, bad("%q is not KEY:MS (e.g. ttft:200)", pair)
		}
		key = strings.ToLower(strings.TrimSpace(key))
		if !validSLOMetric(key) {
			return nil, bad("unknown key %q (valid: %s)", key, strings.Join(sloMetrics, ", "))
		}
		ms, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || math.IsNaN(ms) || math.IsInf(ms, 0) {
			return nil, bad("%s:%s: the target is not a finite number of milliseconds", key, val)
		}
		if ms < 0 {
			return nil, bad("%s:%s: a target must be >= 0 ms", key, val)
		}
		for _, o := range out {
			if o.Metric == key {
				return nil, bad("%s is given twice", key)
			}
		}
		out = append(out, SLO{Metric: key, Ms: ms})
	}
	return out, nil
}

func validSLOMetric(key string) bool {
	for _, m := range sloMetrics {
		if m == key {
			return true
		}
	}
	return false
}

// FormatGoodput is ParseGoodput's inverse ("" for none).
func FormatGoodput(slos []SLO) string {
	parts := make([]string, len(slos))
	for i, o := range slos {
		parts[i] = o.Metric + ":" + strconv.FormatFloat(o.Ms, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// validateSLOs checks targets that did not come through ParseGoodput.
func validateSLOs(slos []SLO) error {
	seen := map[string]bool{}
	for _, o := range slos {
		switch {
		case !validSLOMetric(o.Metric):
			return &ConfigError{msg: fmt.Sprintf("--goodput: unknown key %q (valid: %s)", o.Metric, strings.Join(sloMetrics, ", "))}
		case !(o.Ms >= 0) || math.IsInf(o.Ms, 0):
			return &ConfigError{msg: fmt.Sprintf("--goodput: %s:%v: a target must be a finite number >= 0 ms", o.Metric, o.Ms)}
		case seen[o.Metric]:
			return &ConfigError{msg: fmt.Sprintf("--goodput: %s is given twice", o.Metric)}
		}
		seen[o.Metric] = true
	}
	return nil
}

// meetsSLOs reports whether a completed request with metrics m met every target. As in vLLM,
// a request of one output token has a TPOT of 0.
func meetsSLOs(slos []SLO, m *requestMetrics) bool {
	for _, o := range slos {
		var v float64
		switch o.Metric {
		case "ttft":
			v = m.TTFT
		case "tpot":
			v = m.TPOT // 0 unless HasTPOT
		case "e2el":
			v = m.Latency
		}
		if v > o.Ms {
			return false
		}
	}
	return true
}

// addGoodput fills s's goodput fields from the run's requests: good requests are completed ones
// that met every target; goodput is good requests per second of the run's wall time; attainment
// is the share of the requests that ended (completed or failed; cancelled ones were never
// measured) that were good.
func addGoodput(s *Summary, slos []SLO, reqs []RequestResult) {
	if s.Wall > 0 {
		s.RequestThroughput = float64(s.Requests) / s.Wall.Seconds()
	}
	s.Attainment = math.NaN()
	if len(slos) == 0 {
		return
	}
	s.SLOs = append([]SLO(nil), slos...)
	for i := range reqs {
		if r := &reqs[i]; r.completed() {
			m := metricsOf(r)
			if meetsSLOs(slos, &m) {
				s.Good++
			}
		}
	}
	if s.Wall > 0 {
		s.Goodput = float64(s.Good) / s.Wall.Seconds()
	}
	if ended := s.Requests + s.Failed; ended > 0 {
		s.Attainment = 100 * float64(s.Good) / float64(ended)
	}
}

// goodputLines are the report's goodput lines (after the seeds' lines), when targets were given.
func goodputLines(s Summary) []string {
	if len(s.SLOs) == 0 {
		return nil
	}
	att := "n/a"
	if !math.IsNaN(s.Attainment) {
		att = fmt.Sprintf("%.2f", s.Attainment)
	}
	return []string{
		"SLO targets (ms): " + FormatGoodput(s.SLOs),
		fmt.Sprintf("Request throughput (req/s): %.2f", s.RequestThroughput),
		fmt.Sprintf("Request goodput (req/s): %.2f", s.Goodput),
		fmt.Sprintf("SLO attainment (%%): %s (%d of %d requests)", att, s.Good, s.Requests+s.Failed),
	}
}

// attainment is the dashboard's rolling SLO attainment: of the requests that ended in the last
// span, the share that met every target. Guarded like liveState.
type attainment struct {
	slos []SLO   // immutable
	good *window // 1 for a good request, 0 for one that was not
}

func newAttainment(slos []SLO, w *window) *attainment {
	if len(slos) == 0 {
		return nil
	}
	return &attainment{slos: slos, good: w}
}

// add files a request that ended at at (completed or failed; not cancelled).
func (a *attainment) add(at time.Duration, r *RequestResult) {
	if a == nil {
		return
	}
	v := 0.0
	if r.completed() {
		if m := metricsOf(r); meetsSLOs(a.slos, &m) {
			v = 1
		}
	}
	a.good.add(at, v)
}

// percent is the attainment over the window in % and how many requests it covers (NaN, 0 when
// none ended in it).
func (a *attainment) percent(now time.Duration) (float64, int) {
	if a == nil {
		return math.NaN(), 0
	}
	vs := a.good.values(now)
	if len(vs) == 0 {
		return math.NaN(), 0
	}
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	return 100 * sum / float64(len(vs)), len(vs)
}
