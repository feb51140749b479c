package bench

import (
	"errors"
	"time"

	"rosetop/internal/oneline"
	"rosetop/sched"
)

// RequestResult is one request of a run: its record from the scheduler and its submit target.
type RequestResult struct {
	Index     int           // position in the run's workload
	Target    time.Duration // scheduled submit time (absolute and poisson schedules)
	HasTarget bool
	Record    *sched.Record
}

// completed reports whether the request ran to its end (EOS, length or its caller's stop
// string); cancelled and failed requests are counted, not measured.
func (r *RequestResult) completed() bool {
	if r.Record == nil {
		return false
	}
	switch r.Record.Reason {
	case sched.FinishLength, sched.FinishEOS, sched.FinishStop:
		return true
	}
	return false
}

// ms converts a duration to float milliseconds, the unit of every printed latency.
func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// requestMetrics are one request's derived latencies in ms (DESIGN.md, "Metrics"). Every
// difference is taken on the integer nanosecond timestamps, so TTFT = AddRequest + Tokenize +
// QueueWait + PrefillFirst holds exactly where all four are known. A server outside this process
// shows a client none of its inner times: there only TTFT, TPOT, ITL and Latency are known.
type requestMetrics struct {
	AddRequest   float64   // SubmitEnd - SubmitStart; valid when HasSubmit
	Tokenize     float64   // Tokenized - SubmitEnd; valid when HasSubmit
	QueueWait    float64   // Admitted - Tokenized (post-tokenize queue wait); valid when HasAdmit
	PrefillFirst float64   // FirstToken - Admitted; valid when HasAdmit
	HasSubmit    bool      // the Submit call's end and the tokenization are known
	HasAdmit     bool      // the admission into a prefill batch is known
	TTFT         float64   // FirstToken - SubmitStart
	Latency      float64   // Finished - SubmitStart (E2E)
	TPOT         float64   // (Finished - FirstToken) / (outputs - 1); valid when HasTPOT
	HasTPOT      bool      // more than one output token
	ITL          []float64 // gaps between consecutive Times.Tokens: tokens, or a stream's chunks
	// TokenGaps are a stream's gaps between tokens: a chunk of k tokens g after the previous
	// chunk that carried any adds k gaps of g/k. Valid when HasTokenGaps: the record's chunks
	// all say how many tokens they carried.
	TokenGaps    []float64
	HasTokenGaps bool
	Lag          float64 // actual submit start - target; valid when HasLag
	HasLag       bool
}

// firstTokenMetrics derives the metrics known once the first token is out (AddRequest,
// Tokenize, QueueWait, PrefillFirst, TTFT); the dashboard takes them from a request's first
// token event, the reports from its record, both through here so that they agree exactly.
// A zero timestamp is one the server did not report: the parts that need it stay unknown.
func firstTokenMetrics(t *sched.Times) requestMetrics {
	m := requestMetrics{TTFT: ms(t.FirstToken - t.SubmitStart)}
	if t.SubmitEnd > 0 && t.Tokenized > 0 {
		m.AddRequest, m.Tokenize, m.HasSubmit = ms(t.SubmitEnd-t.SubmitStart), ms(t.Tokenized-t.SubmitEnd), true
	}
	if t.Admitted > 0 && t.Tokenized > 0 {
		m.QueueWait, m.PrefillFirst, m.HasAdmit = ms(t.Admitted-t.Tokenized), ms(t.FirstToken-t.Admitted), true
	}
	return m
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
	if st := r.Record.Stream; st != nil {
		m.TokenGaps, m.HasTokenGaps = tokenGaps(t.Tokens, st.ChunkTokens, len(r.Record.Output))
	}
	m.Lag, m.HasLag = lagOf(r)
	return m
}

// lagOf is r's submit lag in ms, from its due time to its submit (vLLM's client queue time);
// false without a due time. The submitter sleeps until the target, so it is >= 0; clamped like the
// seed does in case a clock's sleep returns a hair early.
func lagOf(r *RequestResult) (float64, bool) {
	if !r.HasTarget || r.Record == nil {
		return 0, false
	}
	return max(0, ms(r.Record.Times.SubmitStart-r.Target)), true
}

// tokenGaps spreads each chunk's gap over the tokens it carried: a chunk of k > 0 tokens that
// arrived g after the previous chunk that carried any adds k gaps of g/k; the first such chunk
// adds none, and so does a chunk of no tokens. ok is false when a count is unknown (< 0), the
// counts do not match the chunks, or they add up to more than the request's outputs.
func tokenGaps(at []time.Duration, counts []int, outputs int) (gaps []float64, ok bool) {
	if len(counts) != len(at) {
		return nil, false
	}
	prev, total := -1, 0
	for i, k := range counts {
		if k > outputs-total {
			return nil, false
		}
		total += max(k, 0)
		switch {
		case k < 0:
			return nil, false
		case k == 0:
			continue
		case prev >= 0:
			g := ms(at[i]-at[prev]) / float64(k)
			for range k {
				gaps = append(gaps, g)
			}
		}
		prev = i
	}
	return gaps, true
}

// runInfo is what the submitter measured about a run besides the records.
type runInfo struct {
	Label      string
	Index      int
	Warmup     bool
	Partial    bool          // interrupted (Ctrl-C, restart, close) before every request finished
	Planned    int           // requests the run was to submit (0: a window, open-ended)
	SubmitWall time.Duration // first submit start -> after the last submit (and its relative sleep)
	LagPrinted bool          // absolute/poisson schedule with interval > 0
	// Since, when set, starts the run's wall clock instead of its first submit: a window of a
	// continuous load starts where the window before it ended, its requests overlapping that one's.
	Since time.Duration
}

// summarize computes a run's Summary from its requests.
func summarize(info runInfo, reqs []RequestResult) Summary {
	var add, tok, queue, prefill, ttft, tpot, itl, gaps, lat, lag, cut []float64
	s := Summary{Index: info.Index, Warmup: info.Warmup, Label: info.Label, SubmitWall: info.SubmitWall, Partial: info.Partial}
	if info.Partial && info.Planned > len(reqs) {
		s.NotSent = info.Planned - len(reqs)
	}
	// The wall clock spans the completed and the failed requests (as vLLM's duration waits for
	// every request), not those cancelled by an interruption.
	var first, last time.Duration
	spanned := false
	span := func(t *sched.Times) {
		if !spanned || t.SubmitStart < first {
			first = t.SubmitStart
		}
		last, spanned = max(last, t.Finished), true
	}
	allGaps := true // every completed stream's token gaps are known
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
				span(&r.Record.Times)
				s.Failed++
				s.Failures = addCount(s.Failures, failureName(r.Record))
				if s.Failed == 1 {
					s.FirstFailure = failureText(r.Record)
				}
			}
			continue
		}
		m := metricsOf(r)
		s.Requests++
		s.PromptTokens += r.Record.PromptTokens
		s.CompletionTokens += len(r.Record.Output)
		if st := r.Record.Stream; st != nil {
			s.TokenSources = addCount(s.TokenSources, st.TokenSource)
			allGaps = allGaps && m.HasTokenGaps
			gaps = append(gaps, m.TokenGaps...)
		}
		if m.HasSubmit {
			add, tok = append(add, m.AddRequest), append(tok, m.Tokenize)
		}
		if m.HasAdmit {
			queue, prefill = append(queue, m.QueueWait), append(prefill, m.PrefillFirst)
		}
		ttft, lat = append(ttft, m.TTFT), append(lat, m.Latency)
		if m.HasTPOT {
			tpot = append(tpot, m.TPOT)
		}
		itl = append(itl, m.ITL...)
		if m.HasLag && info.LagPrinted {
			lag = append(lag, m.Lag)
		}
		span(&r.Record.Times)
	}
	s.AddRequest, s.Tokenize, s.QueueWait = makeDist(add), makeDist(tok), makeDist(queue)
	s.PrefillFirst, s.TTFT, s.TPOT = makeDist(prefill), makeDist(ttft), makeDist(tpot)
	s.ITL, s.Latency, s.SubmitLag = makeDist(itl), makeDist(lat), makeDist(lag)
	s.CutTTFT = makeDist(cut)
	if s.TokenSources != nil && allGaps {
		s.TokenGap = makeDist(gaps)
	} else {
		s.TokenGap = makeDist(nil)
	}
	first = max(first, info.Since)
	if spanned && last > first {
		s.Wall = last - first
		s.Throughput = float64(s.CompletionTokens) / s.Wall.Seconds()
		s.TotalThroughput = float64(s.PromptTokens+s.CompletionTokens) / s.Wall.Seconds()
	}
	return s
}

// briefError is an error that names its cause in a few words ("http 429", "timeout (stall)"):
// a remote server's request failures are.
type briefError interface {
	error
	Brief() string
}

// failureName is how the report counts a failed request: its error's brief name, else its
// finish reason ("error", "too_long").
func failureName(rec *sched.Record) string {
	var b briefError
	if errors.As(rec.Err, &b) {
		return b.Brief()
	}
	return string(rec.Reason)
}

// explainer is an error that says on one line what went wrong, led by its brief name: a remote
// server's request failures do ("http 404: The model `x` does not exist.").
type explainer interface {
	error
	Explain() string
}

// maxFailureText bounds failureText: enough for a server's sentence or two.
const maxFailureText = 240

// failureText is a failed request's cause on one line, led by the name the report counts it
// under: a remote failure's Explain, else failureName and the error's message.
func failureText(rec *sched.Record) string {
	var e explainer
	text := failureName(rec)
	switch {
	case errors.As(rec.Err, &e):
		text = e.Explain()
	case rec.Err != nil:
		text += ": " + rec.Err.Error()
	}
	return oneline.Clip(oneline.Fold(text), maxFailureText)
}

// addCount adds one to m[key], making m when nil.
func addCount(m map[string]int, key string) map[string]int { return addCounts(m, key, 1) }

// addCounts adds n to m[key], making m if it is nil.
func addCounts(m map[string]int, key string, n int) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[key] += n
	return m
}
