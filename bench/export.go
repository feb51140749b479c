package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"rosetop/internal/atomicfile"
	"rosetop/sched"
)

// jsonDist is a Dist with null percentiles when there are no samples (JSON has no NaN).
type jsonDist struct {
	P50  *float64 `json:"p50"`
	P95  *float64 `json:"p95"`
	P99  *float64 `json:"p99"`
	Mean *float64 `json:"mean"`
	Max  *float64 `json:"max"`
	N    int      `json:"n"`
}

func toJSONDist(d Dist) jsonDist {
	if d.N == 0 {
		return jsonDist{}
	}
	f := func(v float64) *float64 { return &v }
	return jsonDist{P50: f(d.P50), P95: f(d.P95), P99: f(d.P99), Mean: f(d.Mean), Max: f(d.Max), N: d.N}
}

type jsonSummary struct {
	Requests         int            `json:"requests"`
	PromptTokens     int            `json:"prompt_tokens"`
	CompletionTokens int            `json:"completion_tokens"`
	SubmitWallS      float64        `json:"submit_wall_s"`
	SubmitLagMs      *jsonDist      `json:"submit_lag_ms,omitempty"`
	AddRequestMs     jsonDist       `json:"add_request_ms"`
	TokenizeMs       jsonDist       `json:"tokenize_ms"`
	QueueWaitMs      jsonDist       `json:"queue_wait_ms"`
	PrefillFirstMs   jsonDist       `json:"prefill_first_token_ms"`
	TTFTMs           jsonDist       `json:"ttft_ms"`
	TPOTMs           jsonDist       `json:"tpot_ms"`
	ITLMs            jsonDist       `json:"itl_ms"`                 // a remote server's: between stream chunks
	TokenGapMs       *jsonDist      `json:"token_gap_ms,omitempty"` // a remote server's: between tokens
	LatencyMs        jsonDist       `json:"latency_ms"`
	Throughput       float64        `json:"throughput_completion_tok_s"`
	TotalThroughput  float64        `json:"throughput_total_tok_s"`
	WallS            float64        `json:"wall_s"` // first submit (a window: the previous window's last finish, if later) to last finish, of the completed and failed requests
	Preemptions      int            `json:"preemptions"`
	Cancelled        int            `json:"cancelled"`
	NotSent          int            `json:"not_sent,omitempty"` // an interrupted run's requests never submitted
	Failed           int            `json:"failed"`
	Failures         map[string]int `json:"failures,omitempty"`      // failed requests by cause
	TokenSources     map[string]int `json:"token_sources,omitempty"` // a remote server's: where output counts came from
	RequestRate      float64        `json:"request_throughput"`      // completed requests/s over wall_s
	Goodput          *jsonGoodput   `json:"goodput,omitempty"`
}

// jsonGoodput is a run's goodput against its --goodput targets.
type jsonGoodput struct {
	TargetsMs      map[string]float64 `json:"targets_ms"`
	Good           int                `json:"good"`
	RequestGoodput float64            `json:"request_goodput"` // good requests/s over wall_s
	AttainmentPct  *float64           `json:"attainment_pct"`  // good / (completed + failed); null: none ended
}

func toJSONGoodput(s Summary) *jsonGoodput {
	if len(s.SLOs) == 0 {
		return nil
	}
	g := &jsonGoodput{TargetsMs: map[string]float64{}, Good: s.Good, RequestGoodput: s.Goodput}
	for _, o := range s.SLOs {
		g.TargetsMs[o.Metric] = o.Ms
	}
	if !math.IsNaN(s.Attainment) {
		a := s.Attainment
		g.AttainmentPct = &a
	}
	return g
}

// jsonRequest is one request with every timestamp in ms from the session clock's epoch; null
// means "never happened" (a cancelled request).
type jsonRequest struct {
	Index          int       `json:"index"`
	ID             uint64    `json:"id"`
	Reason         string    `json:"reason"`
	Failure        string    `json:"failure,omitempty"` // a failed request's cause in a few words ("http 429")
	Error          string    `json:"error,omitempty"`
	PromptTokens   int       `json:"prompt_tokens"`
	OutputTokens   int       `json:"output_tokens"`
	Preemptions    int       `json:"preemptions"`
	SubmitTargetMs *float64  `json:"submit_target_ms"`
	SubmitStartMs  *float64  `json:"submit_start_ms"`
	SubmitEndMs    *float64  `json:"submit_end_ms"`
	TokenizedMs    *float64  `json:"tokenized_ms"`
	AdmittedMs     *float64  `json:"admitted_ms"`
	FirstTokenMs   *float64  `json:"first_token_ms"`
	FinishedMs     *float64  `json:"finished_ms"`
	TokenMs        []float64 `json:"token_ms"` // a remote server's: one per stream chunk
	// A remote server's streams: tokens per chunk of token_ms (-1: not said), and where
	// output_tokens came from (usage, chunks, tokenizer, unknown).
	ChunkTokens []int  `json:"chunk_tokens,omitempty"`
	TokenSource string `json:"token_source,omitempty"`
}

type jsonRun struct {
	Label   string       `json:"label"`
	Warmup  bool         `json:"warmup"`
	Partial bool         `json:"partial"`
	Engine  int          `json:"engine,omitempty"` // the session's n-th engine (dashboard)
	Header  reportHeader `json:"header"`
	Summary jsonSummary  `json:"summary"`
	// RecordsDropped: a steady window of a long dashboard session whose records were dropped to
	// bound memory; its summary stands.
	RecordsDropped bool          `json:"records_dropped,omitempty"`
	Requests       []jsonRequest `json:"requests"`
}

type jsonReport struct {
	Meta   jsonMeta `json:"meta"`
	Config any      `json:"config"`
	// RunsDropped counts the oldest steady windows of a long dashboard session left out to bound
	// memory.
	RunsDropped int       `json:"runs_dropped,omitempty"`
	Runs        []jsonRun `json:"runs"`
}

// jsonMeta says what wrote the file, where, and the epoch every *_ms timestamp counts from.
type jsonMeta struct {
	Tool    string `json:"tool"`
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Host    string `json:"host"`
	Epoch   string `json:"epoch"` // RFC 3339 wall time of the session clock's zero
}

func tsMs(d time.Duration) *float64 {
	if d == 0 {
		return nil
	}
	v := ms(d)
	return &v
}

func toJSONRequest(r *RequestResult) jsonRequest {
	out := jsonRequest{Index: r.Index, Reason: "lost"}
	if r.HasTarget {
		v := ms(r.Target)
		out.SubmitTargetMs = &v
	}
	rec := r.Record
	if rec == nil {
		return out
	}
	t := rec.Times
	out.ID, out.Reason, out.PromptTokens, out.OutputTokens, out.Preemptions = uint64(rec.ID), string(rec.Reason), rec.PromptTokens, len(rec.Output), rec.Preemptions
	if rec.Err != nil {
		out.Error = rec.Err.Error()
	}
	if rec.Reason == sched.FinishError || rec.Reason == sched.FinishTooLong {
		out.Failure = failureName(rec)
	}
	if st := rec.Stream; st != nil {
		out.ChunkTokens, out.TokenSource = st.ChunkTokens, st.TokenSource
	}
	out.SubmitStartMs, out.SubmitEndMs, out.TokenizedMs = tsMs(t.SubmitStart), tsMs(t.SubmitEnd), tsMs(t.Tokenized)
	out.AdmittedMs, out.FirstTokenMs, out.FinishedMs = tsMs(t.Admitted), tsMs(t.FirstToken), tsMs(t.Finished)
	out.TokenMs = make([]float64, len(t.Tokens))
	for i, d := range t.Tokens {
		out.TokenMs[i] = ms(d)
	}
	return out
}

func toJSONRun(r *runResult) jsonRun {
	s := r.sum
	js := jsonSummary{
		Requests: s.Requests, PromptTokens: s.PromptTokens, CompletionTokens: s.CompletionTokens,
		SubmitWallS: s.SubmitWall.Seconds(), AddRequestMs: toJSONDist(s.AddRequest), TokenizeMs: toJSONDist(s.Tokenize),
		QueueWaitMs: toJSONDist(s.QueueWait), PrefillFirstMs: toJSONDist(s.PrefillFirst), TTFTMs: toJSONDist(s.TTFT),
		TPOTMs: toJSONDist(s.TPOT), ITLMs: toJSONDist(s.ITL), LatencyMs: toJSONDist(s.Latency),
		Throughput: s.Throughput, TotalThroughput: s.TotalThroughput, WallS: s.Wall.Seconds(),
		Preemptions: s.Preemptions, Cancelled: s.Cancelled, NotSent: s.NotSent, Failed: s.Failed, Failures: s.Failures,
		TokenSources: s.TokenSources, RequestRate: s.RequestThroughput, Goodput: toJSONGoodput(s),
	}
	if r.hdr.Endpoint != "" {
		d := toJSONDist(s.TokenGap)
		js.TokenGapMs = &d
	}
	if r.hdr.lagPrinted() {
		d := toJSONDist(s.SubmitLag)
		js.SubmitLagMs = &d
	}
	out := jsonRun{Label: s.Label, Warmup: s.Warmup, Partial: s.Partial, Engine: r.engine, Header: r.hdr, Summary: js,
		RecordsDropped: r.recordsDropped, Requests: []jsonRequest{}}
	for i := range r.reqs {
		out.Requests = append(out.Requests, toJSONRequest(&r.reqs[i]))
	}
	return out
}

// writeJSON writes the settings, every run (warmup runs marked) and their requests.
func writeJSON(w io.Writer, settings any, meta jsonMeta, runs []*runResult, dropped int) error {
	rep := jsonReport{Meta: meta, Config: settings, RunsDropped: dropped, Runs: []jsonRun{}}
	for _, r := range runs {
		rep.Runs = append(rep.Runs, toJSONRun(r))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(rep)
}

var csvHeader = []string{
	"run", "warmup", "partial", "index", "id", "reason", "prompt_tokens", "output_tokens", "preemptions",
	"submit_target_ms", "submit_start_ms", "submit_end_ms", "tokenized_ms", "admitted_ms", "first_token_ms", "finished_ms",
	"add_request_ms", "tokenize_ms", "queue_wait_ms", "prefill_first_token_ms", "ttft_ms", "tpot_ms", "latency_ms", "submit_lag_ms",
	"failure", "token_source", "chunks",
}

// writeCSV writes one row per request of every run, after a header line. Empty cells: n/a.
func writeCSV(w io.Writer, runs []*runResult) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
	p := func(v *float64) string {
		if v == nil {
			return ""
		}
		return f(*v)
	}
	for _, run := range runs {
		for i := range run.reqs {
			r := &run.reqs[i]
			j := toJSONRequest(r)
			row := []string{run.sum.Label, strconv.FormatBool(run.sum.Warmup), strconv.FormatBool(run.sum.Partial),
				strconv.Itoa(j.Index), strconv.FormatUint(j.ID, 10), j.Reason, strconv.Itoa(j.PromptTokens),
				strconv.Itoa(j.OutputTokens), strconv.Itoa(j.Preemptions), p(j.SubmitTargetMs), p(j.SubmitStartMs),
				p(j.SubmitEndMs), p(j.TokenizedMs), p(j.AdmittedMs), p(j.FirstTokenMs), p(j.FinishedMs)}
			derived := make([]string, 8)
			if r.completed() {
				m := metricsOf(r)
				derived[4], derived[6] = f(m.TTFT), f(m.Latency)
				if m.HasSubmit {
					derived[0], derived[1] = f(m.AddRequest), f(m.Tokenize)
				}
				if m.HasAdmit {
					derived[2], derived[3] = f(m.QueueWait), f(m.PrefillFirst)
				}
				if m.HasTPOT {
					derived[5] = f(m.TPOT)
				}
				if m.HasLag {
					derived[7] = f(m.Lag)
				}
			}
			stream := []string{j.Failure, j.TokenSource, ""}
			if j.ChunkTokens != nil {
				stream[2] = strconv.Itoa(len(j.ChunkTokens))
			}
			row = append(append(row, derived...), stream...)
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeFile replaces path atomically with what write produces; the error names the flag.
func writeFile(flagName, path string, write func(io.Writer) error) error {
	if err := atomicfile.Write(path, write); err != nil {
		return fmt.Errorf("--%s %s: %w", flagName, path, err)
	}
	return nil
}
