package bench

import (
	"time"

	"rosetop/sched"
)

// RequestResult is one request of a run: its record from the scheduler and its submit target.
type RequestResult struct {
	Index     int           // position in the run's workload
	Target    time.Duration // scheduled submit time (absolute and poisson schedules)
	HasTarget bool
	Record    *sched.Record
}

// completed reports whether the request ran to its end (EOS or length); cancelled and failed
// requests are counted, not measured.
func (r *RequestResult) completed() bool {
	return r.Record != nil && (r.Record.Reason == sched.FinishLength || r.Record.Reason == sched.FinishEOS)
}

// ms converts a duration to float milliseconds, the unit of every printed latency.
func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// requestMetrics are one request's derived latencies in ms (DESIGN.md, "Metrics"). Every
// difference is taken on the integer nanosecond timestamps, so TTFT = AddRequest + Tokenize +
// QueueWait + PrefillFirst holds exactly.
type requestMetrics struct {
	AddRequest   float64   // SubmitEnd - SubmitStart
	Tokenize     float64   // Tokenized - SubmitEnd
	QueueWait    float64   // Admitted - Tokenized (post-tokenize queue wait)
	PrefillFirst float64   // FirstToken - Admitted
	TTFT         float64   // FirstToken - SubmitStart
	Latency      float64   // Finished - SubmitStart (E2E)
	TPOT         float64   // (Finished - FirstToken) / (outputs - 1); valid when HasTPOT
	HasTPOT      bool      // more than one output token
	ITL          []float64 // gaps between consecutive token timestamps
	Lag          float64   // actual submit start - target; valid when HasLag
	HasLag       bool
}

// firstTokenMetrics derives the metrics known once the first token is out (AddRequest,
// Tokenize, QueueWait, PrefillFirst, TTFT); the dashboard takes them from a request's first
// token event, the reports from its record, both through here so that they agree exactly.
func firstTokenMetrics(t *sched.Times) requestMetrics {
	return requestMetrics{
		AddRequest:   ms(t.SubmitEnd - t.SubmitStart),
		Tokenize:     ms(t.Tokenized - t.SubmitEnd),
		QueueWait:    ms(t.Admitted - t.Tokenized),
		PrefillFirst: ms(t.FirstToken - t.Admitted),
		TTFT:         ms(t.FirstToken - t.SubmitStart),
	}
}

// metricsOf derives r's metrics; r must be completed.
func metricsOf(r *RequestResult) requestMetrics {
	t := r.Record.Times
	m := firstTokenMetrics(&t)
	m.Latency = ms(t.Finished - t.SubmitStart)
	if n := len(r.Record.Output); n > 1 {
		m.TPOT = ms(t.Finished-t.FirstToken) / float64(n-1)
		m.HasTPOT = true
	}
	for i := 1; i < len(t.Tokens); i++ {
		m.ITL = append(m.ITL, ms(t.Tokens[i]-t.Tokens[i-1]))
	}
	if r.HasTarget {
		// The submitter sleeps until the target, so the lag is >= 0; clamp like the seed does
		// in case a clock's sleep returns a hair early.
		m.Lag = max(0, ms(t.SubmitStart-r.Target))
		m.HasLag = true
	}
	return m
}

// runInfo is what the submitter measured about a run besides the records.
type runInfo struct {
	Label      string
	Index      int
	Warmup     bool
	Partial    bool          // interrupted (Ctrl-C, restart, close) before every request finished
	SubmitWall time.Duration // first submit start -> after the last submit (and its relative sleep)
	LagPrinted bool          // absolute/poisson schedule with interval > 0
}

// summarize computes a run's Summary from its requests.
func summarize(info runInfo, reqs []RequestResult) Summary {
	var add, tok, queue, prefill, ttft, tpot, itl, lat, lag, cut []float64
	s := Summary{Index: info.Index, Warmup: info.Warmup, Label: info.Label, SubmitWall: info.SubmitWall, Partial: info.Partial}
	var first, last time.Duration
	for i := range reqs {
		r := &reqs[i]
		if r.Record == nil { // submitted, never finished (an interrupted run's stuck request)
			s.Cancelled++
			continue
		}
		s.Preemptions += r.Record.Preemptions
		if !r.completed() {
			if r.Record.Reason == sched.FinishCancelled {
				s.Cancelled++
				s.CutTokens += len(r.Record.Output)
				if t := r.Record.Times; t.FirstToken > 0 {
					cut = append(cut, ms(t.FirstToken-t.SubmitStart))
				}
			} else {
				s.Failed++
			}
			continue
		}
		m := metricsOf(r)
		s.Requests++
		s.PromptTokens += r.Record.PromptTokens
		s.CompletionTokens += len(r.Record.Output)
		add, tok, queue = append(add, m.AddRequest), append(tok, m.Tokenize), append(queue, m.QueueWait)
		prefill, ttft, lat = append(prefill, m.PrefillFirst), append(ttft, m.TTFT), append(lat, m.Latency)
		if m.HasTPOT {
			tpot = append(tpot, m.TPOT)
		}
		itl = append(itl, m.ITL...)
		if m.HasLag && info.LagPrinted {
			lag = append(lag, m.Lag)
		}
		t := r.Record.Times
		if s.Requests == 1 || t.SubmitStart < first {
			first = t.SubmitStart
		}
		if t.Finished > last {
			last = t.Finished
		}
	}
	s.AddRequest, s.Tokenize, s.QueueWait = makeDist(add), makeDist(tok), makeDist(queue)
	s.PrefillFirst, s.TTFT, s.TPOT = makeDist(prefill), makeDist(ttft), makeDist(tpot)
	s.ITL, s.Latency, s.SubmitLag = makeDist(itl), makeDist(lat), makeDist(lag)
	s.CutTTFT = makeDist(cut)
	if s.Requests > 0 && last > first {
		s.Wall = last - first
		s.Throughput = float64(s.CompletionTokens) / s.Wall.Seconds()
		s.TotalThroughput = float64(s.PromptTokens+s.CompletionTokens) / s.Wall.Seconds()
	}
	return s
}
