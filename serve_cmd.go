package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"rosetop/bench"
	"rosetop/sched"
	"rosetop/serve"
	"rosetop/tui"
)

// serveOptions are `rosetop serve`'s own flags; the model, engine and scheduler flags are the
// bench ones (serveShared), bound to an options value.
type serveOptions struct {
	host         string
	port         int
	servedName   string
	maxQueue     int
	window       int
	shutdownS    float64 // --shutdown-timeout, seconds
	metricsNames string
	logRequests  bool
	dashboard    bool
	origins      string   // --allowed-origins as given
	allowed      []string // parsed: "*" or origins; nil: no CORS
	apiKeys      []string // --api-key, each given, else $VLLM_API_KEY: never printed or exported
}

// keysFlag is serve's --api-key: each use adds a key; none shows in usage or errors.
type keysFlag struct{ p *[]string }

func (f keysFlag) String() string { return "" }

func (f keysFlag) Set(s string) error {
	if s == "" {
		return errors.New("empty: an empty key would let in a request that carries none")
	}
	*f.p = append(*f.p, s)
	return nil
}

// checkKeys refuses API keys that no client could match: HTTP trims white space from either end
// of a header's value, and a control character cannot be sent in one. The message names where
// the keys came from (from, a flag or a variable), never a key.
func checkKeys(from string, keys []string) error {
	for _, k := range keys {
		switch {
		case strings.TrimSpace(k) != k:
			return badFlag("%s: a key begins or ends with white space, which HTTP trims from the Authorization header: no client could match it", from)
		case strings.ContainsFunc(k, unicode.IsControl):
			return badFlag("%s: a key holds a control character, which no client can send in the Authorization header", from)
		}
	}
	return nil
}

// serveShared are the bench flags that mean something to a server: the model, the engine, the
// scheduler, the outputs.
var serveShared = []string{
	"model", "device", "threads", "paged-attn", "cuda-graph", "capture-ahead", "gpu-memory-fraction", "no-prefix-cache",
	"max-batch-size", "prefill-max-batch-size", "prefill-max-tokens", "policy", "burst-quiet-us", "max-seq-len",
	"tokenize-workers", "seed", "json", "csv", "cpuprofile", "record",
}

// serveUsages are the help of the shared flags whose meaning differs on a server: its sequences
// are the clients', and each request samples with its own seed.
var serveUsages = map[string]string{
	"max-seq-len": fmt.Sprintf("longest sequence (0: the model's positions) [0..%d]", maxNewTokens),
	"seed":        fmt.Sprintf("seed of random:NAME weights (a request samples with its own \"seed\", else a random one) [0..%d]", uint64(math.MaxUint64)),
}

// grace is --shutdown-timeout as serve.Options takes it: 0 there is the default, a negative
// duration none.
func (so serveOptions) grace() time.Duration {
	if d := time.Duration(so.shutdownS * float64(time.Second)); d > 0 {
		return d
	}
	return -1
}

// newServeFlagSet binds serve's flags: its own to so, the shared ones to o.
func newServeFlagSet(o *options, so *serveOptions) *flag.FlagSet {
	all := newFlagSet(o)
	fs := flag.NewFlagSet("rosetop serve", flag.ContinueOnError)
	for _, name := range serveShared {
		f := all.Lookup(name)
		usage := f.Usage
		if u, ok := serveUsages[name]; ok {
			usage = u
		}
		fs.Var(f.Value, f.Name, usage)
	}
	fs.StringVar(&so.host, "host", so.host, "address to listen on")
	intVar(fs, &so.port, "port", 0, 65535, "port to listen on (0: any free port)")
	fs.StringVar(&so.servedName, "served-model-name", so.servedName, `the model id clients send as "model" (default: the --model value, or tiny-gpt2)`)
	intVar(fs, &so.maxQueue, "max-queue", 0, maxRequests, "answer 429 with Retry-After to a request whose choices would make more than this many wait for the scheduler (0: no limit)")
	intVar(fs, &so.window, "window", 1, maxRequests, "finished requests per cold/steady window of the dashboard and the summary")
	secondsVar(fs, &so.shutdownS, "shutdown-timeout", 0, 86400, "on SIGTERM/SIGINT, how long requests in flight may run before they are cancelled (0: at once)")
	fs.StringVar(&so.metricsNames, "metrics-names", so.metricsNames, "rosetop (rosetop_num_requests_running, ...) | vllm (vllm:num_requests_running, ...: vLLM's current names, not the ones it deprecated)")
	fs.BoolVar(&so.logRequests, "log-requests", so.logRequests, "log one line per request on stderr (not with --dashboard)")
	fs.BoolVar(&so.dashboard, "dashboard", so.dashboard, "show the live dashboard over the server's own traffic")
	fs.Var(keysFlag{&so.apiKeys}, "api-key", "require \"Authorization: Bearer KEY\" on the API (/v1/..., /tokenize, /detokenize; not /health, /ping, /version, /metrics), as vLLM's --api-key; given again, any of the keys; default $VLLM_API_KEY, as vLLM's; never printed or exported")
	fs.StringVar(&so.origins, "allowed-origins", so.origins, `origins whose web pages may call the server (CORS), comma-separated or as vLLM takes them, a JSON list: '["http://localhost:3000"]'; * any (vLLM's default), "" none`)
	return fs
}

func serveUsage(w io.Writer) {
	o, so := defaultServeFlags()
	fs := newServeFlagSet(&o, &so)
	fs.SetOutput(w)
	fmt.Fprintln(w, "usage: rosetop serve [flags]\n\nServes the engine over OpenAI's API (/v1/completions, /v1/chat/completions, /v1/models,\n/health) with Prometheus metrics at /metrics.\n\nFlags:")
	fs.PrintDefaults()
}

// defaultServeFlags are serve's defaults: a server keeps its KV cache paged and replays decode
// steps from CUDA Graphs (on a GPU) unless told otherwise.
func defaultServeFlags() (options, serveOptions) {
	o := defaultOptions()
	o.Paged, o.CUDAGraph, o.WarmupRuns = true, true, 0
	return o, serveOptions{host: "127.0.0.1", port: 8000, window: 64, shutdownS: 30, metricsNames: "rosetop", origins: "*"}
}

func parseServe(args []string) (options, serveOptions, error) {
	o, so := defaultServeFlags()
	fs := newServeFlagSet(&o, &so)
	if err := parseFlagSet(fs, args, serveUsage); err != nil {
		return o, so, err
	}
	if o.PrefillMaxBatch == 0 {
		o.PrefillMaxBatch = o.MaxBatch
	}
	keysFrom := "--api-key"
	if k := os.Getenv("VLLM_API_KEY"); len(so.apiKeys) == 0 && k != "" { // as vLLM reads it: --api-key wins, empty is none
		so.apiKeys, keysFrom = []string{k}, "$VLLM_API_KEY"
	}
	if err := checkKeys(keysFrom, so.apiKeys); err != nil {
		return o, so, err
	}
	switch {
	case so.servedName != "" && strings.TrimSpace(so.servedName) == "":
		return o, so, badFlag("--served-model-name %q: blank (give a model id, or leave the flag out for the default)", so.servedName)
	case strings.TrimSpace(so.servedName) != so.servedName:
		return o, so, badFlag("--served-model-name %q: begins or ends with white space, which clients would have to send as part of the id", so.servedName)
	case strings.ContainsFunc(so.servedName, unicode.IsControl):
		return o, so, badFlag("--served-model-name %q: holds a control character (clients print and send the id)", so.servedName)
	case so.metricsNames != string(serve.RosetopNames) && so.metricsNames != string(serve.VLLMNames):
		return o, so, badFlag("--metrics-names: unknown naming %q (valid: rosetop, vllm)", so.metricsNames)
	case so.logRequests && so.dashboard:
		return o, so, badFlag("--log-requests and --dashboard both want the terminal: give one")
	case !utf8.ValidString(so.servedName): // clients send the id back as JSON text; metrics label with it
		return o, so, badFlag("--served-model-name %q: not valid UTF-8", so.servedName)
	case so.servedName == "" && !utf8.ValidString(o.Model):
		return o, so, badFlag("--model %q: not valid UTF-8, so it cannot be the served model id: give --served-model-name", o.Model)
	}
	if err := o.validate(); err != nil {
		return o, so, err
	}
	allowed, err := parseOrigins(so.origins)
	if err != nil {
		return o, so, err
	}
	so.allowed = allowed
	return o, so, nil
}

// parseOrigins reads --allowed-origins: a JSON list of strings (vLLM's form) or a comma-separated
// list; "" is none. Each is "*", or scheme://host[:port] or "null", as a browser sends Origin.
func parseOrigins(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	var list []string
	switch {
	case s == "":
		return nil, nil
	case strings.HasPrefix(s, "["):
		if err := json.Unmarshal([]byte(s), &list); err != nil {
			return nil, badFlag("--allowed-origins %q: not a JSON list of strings", printable(s))
		}
	default:
		list = strings.Split(s, ",")
	}
	for i, o := range list {
		list[i] = strings.TrimSpace(o)
		if _, err := serve.CheckOrigin(list[i]); err != nil {
			return nil, badFlag("--allowed-origins %q: want * or scheme://host[:port], e.g. http://localhost:3000", printable(list[i]))
		}
	}
	return list, nil
}

// runServe is `rosetop serve`: the engine behind OpenAI's API until SIGTERM/SIGINT (or q on the
// dashboard), then a graceful shutdown: no new connections, requests in flight finish within
// --shutdown-timeout, the summary goes to stdout and the exports are written; exit 0.
func runServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, so, err := parseServe(args)
	if err != nil {
		return parseErr(err)
	}
	if err := checkOutputs(o, stdout); err != nil {
		return err
	}
	var term *dashTerminal
	if so.dashboard {
		t, err := findTerminal(stdin, stderr, openTTY)
		switch {
		case errors.Is(err, errNoTerminal):
			return usageError{errors.New("--dashboard needs a terminal, and there is none: stdin and stderr are not one and /dev/tty cannot be opened; without --dashboard rosetop serve runs headless")}
		case errors.Is(err, errDumbTerminal):
			return usageError{errors.New("--dashboard needs a terminal that can move the cursor, and TERM=dumb says this one cannot; without --dashboard rosetop serve runs headless")}
		case err != nil:
			return err
		}
		defer t.close()
		defer t.quiet()()
		term = &t
	}
	return withCPUProfile(o.CPUProfilePath, func() error { return serveSession(ctx, o, so, term, args, stdout, stderr) })
}

func serveSession(ctx context.Context, o options, so serveOptions, term *dashTerminal, args []string, stdout, stderr io.Writer) error {
	// The address is taken before the model loads, so a busy port or a bad host fails at once;
	// connections made while it loads wait in the listen backlog until it serves.
	ln, err := net.Listen("tcp", net.JoinHostPort(so.host, strconv.Itoa(so.port)))
	if err != nil {
		err = fmt.Errorf("--host %s --port %d: %w", printable(so.host), so.port, err)
		var dns *net.DNSError
		if (errors.As(err, &dns) && dns.IsNotFound) || errors.Is(err, syscall.EADDRNOTAVAIL) { // no such host here: bad input
			return usageError{err}
		}
		return err // the port is taken or not ours to take: the machine's state
	}
	serving := false
	defer func() {
		if !serving {
			ln.Close()
		}
	}()
	prov := bench.NewInProcess(o.inProcess())
	if err := prov.Prepare(ctx, stderr); err != nil {
		return err
	}
	mi := prov.Model()
	seqs := mi.MaxPositions
	if o.MaxSeqLen > 0 {
		seqs = o.MaxSeqLen // past the model's positions NewSession refuses it, as bench's --max-seq-len
	}
	name := so.servedName
	if name == "" {
		name = o.Model
	}
	if name == "" {
		name = "tiny-gpt2"
	}
	var sess *bench.Session // set below, before the server serves: read by the metrics' ledger
	metrics, err := serve.NewMetrics(serve.MetricsOptions{Names: serve.MetricNames(so.metricsNames), Model: name, MaxModelLen: seqs,
		Ledger: func() []serve.LedgerEntry { return ledgerOf(sess.View()) }})
	if err != nil {
		return err
	}
	cfg := o.sessionConfig()
	cfg.Workload.NumRequests, cfg.MaxSeqLen = so.window, seqs
	progress := stderr
	if term != nil {
		progress = term.out
	}
	// The session outlives a signal: the server's shutdown lets the requests in flight finish
	// within --shutdown-timeout, and Close below ends the session after it.
	sess, err = bench.NewSession(context.WithoutCancel(ctx), cfg, bench.SessionOptions{Provider: prov, Progress: progress, External: true,
		OnStep: metrics.ObserveStep, KeepRecords: o.JSONPath != "" || o.CSVPath != ""})
	if err != nil {
		return err
	}
	var log *slog.Logger
	if so.logRequests {
		log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	eng := sessionEngine{s: sess, m: serve.Model{ID: name, MaxSeqLen: seqs, VocabSize: mi.Vocab, Tokenizer: mi.Codec, EOS: mi.EOS, Created: time.Now()}}
	var errLog *stdlog.Logger // net/http's own errors: into the events pane, not over the dashboard
	if term != nil {
		errLog = stdlog.New(eventsWriter{sess}, "", 0)
	}
	drain := &drainNote{w: stderr, held: term != nil, signalled: ctx.Done()}
	srv, err := serve.New(eng, serve.Options{MaxQueue: so.maxQueue, ShutdownTimeout: so.grace(),
		Metrics: metrics, Log: log, ErrorLog: errLog, OnDrain: drain.note, AllowedOrigins: so.allowed, APIKeys: so.apiKeys, Version: toolInfo().Version})
	if err != nil {
		return errors.Join(err, sess.Close())
	}
	var sample func() *bench.View // without a dashboard the recorder reads the views itself
	if term == nil {
		sample = sess.View
	}
	rec, err := startRecording(o, "serve", args, sample)
	if err != nil {
		return errors.Join(err, sess.Close())
	}
	auth := ""
	if len(so.apiKeys) > 0 { // from --api-key or $VLLM_API_KEY: say so, as a 401 would surprise
		auth = "; the API needs an API key (Authorization: Bearer)"
	}
	fmt.Fprintf(stderr, "rosetop: serving %s on http://%s/v1 (metrics at /metrics)%s; Ctrl-C or SIGTERM stops\n", name, ln.Addr(), auth)
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	served := make(chan error, 1)
	serving = true // Serve closes ln
	go func() { served <- srv.Serve(serveCtx, ln) }()
	var runErr error
	drained := make(chan struct{})
	if term != nil {
		runErr = tui.Run(ctx, tapped(sess, rec), term.options())
		byKey := ctx.Err() == nil // q, not a signal, ended the dashboard
		drain.release()
		stopServing() // q on the dashboard stops the server as a signal would
		if byKey {
			go func() {
				select {
				case <-ctx.Done(): // a signal after q: what is still in flight is cancelled now
					srv.StopNow()
				case <-drained:
				}
			}()
		}
	}
	serveErr := <-served
	close(drained)
	closeErr := sess.Close()
	recErr := closeRecording(rec, o, stderr)
	repErr := sess.Report(stdout)
	settings, expErr := serveSettings(o, so)
	if expErr == nil {
		expErr = sess.Export(bench.Exports{JSONPath: o.JSONPath, CSVPath: o.CSVPath, Settings: settings}, stderr)
	}
	return errors.Join(runErr, serveErr, closeErr, recErr, repErr, expErr)
}

// serveSettings is the "config" of serve's --json export: the shared flags as bench writes them
// and serve's own, without bench's workload flags (on a server the clients are the workload).
func serveSettings(o options, so serveOptions) (map[string]any, error) {
	cfg := map[string]any{
		"command": "serve", "host": so.host, "port": so.port, "served_model_name": so.servedName, "max_queue": so.maxQueue,
		"window": so.window, "shutdown_timeout_s": so.shutdownS, "metrics_names": so.metricsNames,
		"log_requests": so.logRequests, "dashboard": so.dashboard,
	}
	var all map[string]json.RawMessage
	raw, err := json.Marshal(o)
	if err == nil {
		err = json.Unmarshal(raw, &all)
	}
	if err != nil {
		return nil, fmt.Errorf("--json: the settings: %w", err)
	}
	for _, name := range serveShared {
		key := strings.ReplaceAll(name, "-", "_")
		if v, ok := all[key]; ok { // --json, --csv, ...: not in options' JSON
			cfg[key] = v
		}
	}
	return cfg, nil
}

// eventsWriter makes each write, a log entry, a line of the session's events pane.
type eventsWriter struct{ s *bench.Session }

func (w eventsWriter) Write(p []byte) (int, error) {
	w.s.Note(string(p))
	return len(p), nil
}

// sessionEngine is a bench.Session taking external load as serve's Engine.
type sessionEngine struct {
	s *bench.Session
	m serve.Model
}

func (e sessionEngine) Submit(ctx context.Context, r sched.Request) (serve.Stream, error) {
	st, err := e.s.Submit(ctx, r)
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (e sessionEngine) Waiting() int       { return e.s.Waiting() }
func (e sessionEngine) Model() serve.Model { return e.m }

// ledgerOf is the view's cold-start ledger as serve's gauges take it.
func ledgerOf(v *bench.View) []serve.LedgerEntry {
	if v == nil {
		return nil
	}
	out := make([]serve.LedgerEntry, len(v.Ledger))
	for i, e := range v.Ledger {
		out[i] = serve.LedgerEntry{What: e.What, Detail: e.Detail, Took: e.Took}
	}
	return out
}

// drainNote says on w that the server waits for the requests in flight before it stops, and what
// a signal does meanwhile. While a dashboard holds the terminal the note waits for release.
type drainNote struct {
	w         io.Writer
	signalled <-chan struct{} // closed by the first signal
	mu        sync.Mutex      // guards held and pending: note runs on Serve's goroutine
	held      bool
	pending   string
}

func (d *drainNote) note(inFlight int, grace time.Duration) {
	then := "Ctrl-C cancels them now" // after q: the first signal ends the grace
	select {
	case <-d.signalled:
		then = "a second Ctrl-C exits at once"
	default:
	}
	msg := fmt.Sprintf("rosetop: stopping: %d requests in flight, letting them finish for up to %s (%s)\n", inFlight, grace, then)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held {
		d.pending = msg
		return
	}
	io.WriteString(d.w, msg)
}

// release writes a note that waited for the dashboard, and any later one at once.
func (d *drainNote) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held = false
	if d.pending != "" {
		io.WriteString(d.w, d.pending)
	}
}
