package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"rosetop/bench"
	"rosetop/internal/atomicfile"
	"rosetop/plot"
)

// sweepAxis is the swept setting.
type sweepAxis struct {
	flag   string                      // the list's flag
	name   string                      // the chart's axis label, with its unit
	values []float64                   // in the order given
	apply  func(o *options, v float64) // sets one point's value
}

// sweepAxes are the settings rosetop sweep can sweep, each with the flag it replaces.
func sweepAxes() []sweepAxis {
	return []sweepAxis{
		{flag: "request-rates", name: "request rate (req/s)", apply: func(o *options, v float64) { o.RequestRate, o.SubmitIntervalMs = requestRate(v), 0 }},
		{flag: "concurrency", name: "max concurrency (requests)", apply: func(o *options, v float64) { o.MaxConcurrency = int(v) }},
		{flag: "prefill-max-batch-sizes", name: "prefill max batch size (requests)", apply: func(o *options, v float64) { o.PrefillMaxBatch = int(v) }},
	}
}

// sweepReplaces is the bench flag each axis sets per point.
var sweepReplaces = map[string][]string{
	"request-rates":           {"request-rate", "submit-interval-ms", "replay"},
	"concurrency":             {"max-concurrency"},
	"prefill-max-batch-sizes": {"prefill-max-batch-size"},
}

// maxSweepPoints bounds a sweep's list.
const maxSweepPoints = 64

// listFlag is a sweep list: comma-separated numbers, each within the axis's range, none twice,
// kept in the order given. With inf, the list may also hold inf (any case, as strconv.ParseFloat
// reads it), which is +Inf. Set checks the whole list as it parses it, so a bad list is a flag
// error naming it.
type listFlag struct {
	values  *[]float64
	lo, hi  float64
	integer bool
	inf     bool
	onSet   func(v float64) // lets the bench flags' checks see a point's value: the first finite one, else +Inf
}

func (f listFlag) String() string {
	if f.values == nil {
		return ""
	}
	parts := make([]string, len(*f.values))
	for i, v := range *f.values {
		parts[i] = plot.Label(v)
	}
	return strings.Join(parts, ",")
}

func (f listFlag) Set(s string) error {
	parts := strings.Split(s, ",")
	if strings.TrimSpace(s) == "" || len(parts) > maxSweepPoints {
		return fmt.Errorf("want 1 to %d comma-separated values, e.g. 1,4,16,64", maxSweepPoints)
	}
	var out []float64
	for _, p := range parts {
		p = strings.TrimSpace(p)
		v, err := parseFinite(p)
		if f.integer {
			v, err = parseListInt(p) // as the integer flags read theirs: 0x10 is 16, 1e2 is no integer
		}
		isInf := false
		if x, perr := strconv.ParseFloat(p, 64); perr == nil && math.IsInf(x, 1) {
			v, err, isInf = x, nil, true
		}
		switch {
		case isInf && !f.inf:
			return fmt.Errorf("%q is not a number from %g to %g (only --request-rates takes inf)", p, f.lo, f.hi)
		case err != nil && f.integer:
			return fmt.Errorf("%q is not an integer", p)
		case err != nil:
			return fmt.Errorf("%q is not a number", p)
		case !isInf && (v < f.lo || v > f.hi):
			return fmt.Errorf("%s must be from %g to %g", p, f.lo, f.hi)
		case slices.Contains(out, v):
			return fmt.Errorf("%s is listed twice", p)
		}
		out = append(out, v)
	}
	*f.values = out
	if f.onSet != nil {
		first := math.Inf(1)
		if i := slices.IndexFunc(out, func(v float64) bool { return !math.IsInf(v, 1) }); i >= 0 {
			first = out[i]
		}
		f.onSet(first)
	}
	return nil
}

// parseListInt parses an integer list's value with intFlag's syntax (decimal, 0x, 0o, 0b, digits
// separated by _).
func parseListInt(s string) (float64, error) {
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, err
	}
	return float64(v), nil // out of range: saturated, refused by the range check
}

// sweepFlags are where rosetop sweep's own flags land.
type sweepFlags struct {
	lists  map[string]*[]float64 // by axis flag
	outDir string
}

func bindSweepFlags(fs *flag.FlagSet, o *options, sf *sweepFlags) {
	sf.lists = map[string]*[]float64{"request-rates": new([]float64), "concurrency": new([]float64), "prefill-max-batch-sizes": new([]float64)}
	fs.Var(listFlag{values: sf.lists["request-rates"], lo: minRate, hi: maxRate, inf: true, onSet: func(v float64) { o.RequestRate = requestRate(v) }},
		"request-rates", "sweep --request-rate over these rates (req/s), e.g. 1,2,4,8,inf (inf: every request at once, as --request-rate inf)")
	fs.Var(listFlag{values: sf.lists["concurrency"], lo: 1, hi: maxRequests, integer: true},
		"concurrency", "sweep --max-concurrency over these limits, e.g. 1,4,16,64")
	fs.Var(listFlag{values: sf.lists["prefill-max-batch-sizes"], lo: 1, hi: maxBatch, integer: true},
		"prefill-max-batch-sizes", "sweep --prefill-max-batch-size over these sizes, e.g. 1,4,16,64")
	fs.StringVar(&sf.outDir, "out-dir", "rosetop-sweep", "directory for sweep.json, sweep.csv, sweep.png, sweep.svg and each point's JSON and report (not one holding an earlier sweep's)")
}

func sweepUsage(w io.Writer) {
	o, sf := defaultOptions(), sweepFlags{}
	fs := newFlagSet(&o)
	bindSweepFlags(fs, &o, &sf)
	shown := flag.NewFlagSet("sweep", flag.ContinueOnError) // the flags parseSweep takes
	fs.VisitAll(func(f *flag.Flag) {
		if !sweepRefuses(f.Name) {
			shown.Var(f.Value, f.Name, f.Usage)
		}
	})
	shown.SetOutput(w)
	fmt.Fprintln(w, "usage: rosetop sweep (--request-rates L | --concurrency L | --prefill-max-batch-sizes L) [--out-dir DIR] [bench flags]")
	shown.PrintDefaults()
}

// sweepRefuses reports whether parseSweep refuses bench flag name: sweep writes its own files to
// --out-dir (not bench's --json, in either format) and has no dashboard.
func sweepRefuses(name string) bool {
	switch name {
	case "json", "csv", "save-trace", "record", "result-format", "save-detailed", "percentile-metrics", "metric-percentiles", "watch":
		return true
	}
	return false
}

// parseSweep parses the command line of `rosetop sweep`: the bench flags, which every point
// shares, and exactly one axis; every point's options are checked before anything runs.
func parseSweep(ctx context.Context, args []string, stderr io.Writer) (options, sweepAxis, string, error) {
	var sf sweepFlags
	o, set, err := parseOptionsWith(ctx, args, stderr, func(fs *flag.FlagSet, o *options) { o.command = "sweep"; bindSweepFlags(fs, o, &sf) }, sweepUsage)
	for _, ax := range sweepAxes() { // first: it explains what the bench checks would refuse
		for _, c := range sweepReplaces[ax.flag] {
			if set[ax.flag] && set[c] {
				return o, sweepAxis{}, "", badFlag("--%s and --%s both set the swept value: give one", ax.flag, c)
			}
		}
	}
	if err != nil {
		return o, sweepAxis{}, "", err
	}
	var axes []sweepAxis
	for _, ax := range sweepAxes() {
		if set[ax.flag] {
			ax.values = *sf.lists[ax.flag]
			axes = append(axes, ax)
		}
	}
	switch {
	case len(axes) != 1:
		return o, sweepAxis{}, "", badFlag("rosetop sweep needs exactly one of --request-rates, --concurrency, --prefill-max-batch-sizes")
	case o.JSONPath != "" || o.CSVPath != "" || o.SaveTrace != "":
		return o, sweepAxis{}, "", badFlag("rosetop sweep writes its files to --out-dir: drop --json, --csv and --save-trace")
	case o.RecordPath != "":
		return o, sweepAxis{}, "", badFlag("--record: rosetop sweep has no dashboard to record; record one point with rosetop bench --record")
	case sf.outDir == "":
		return o, sweepAxis{}, "", badFlag("--out-dir: empty")
	}
	ax := axes[0]
	for _, v := range ax.values {
		p := o
		ax.apply(&p, v)
		if err := p.validate(); err != nil {
			return o, sweepAxis{}, "", badFlag("--%s %s: %v", ax.flag, plot.Label(v), err)
		}
	}
	return o, ax, sf.outDir, nil
}

// runSweep is `rosetop sweep`: each point is a bench run (its warmup and repeat runs) with the
// axis set to one value, on a fresh engine; the point's numbers are the medians over its measured
// runs. It prints the table, writes the files and draws the charts; a progress bar with an ETA
// goes to stderr.
func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, ax, dir, err := parseSweep(ctx, args, stderr)
	if err != nil {
		return parseErr(err)
	}
	if err := checkOutputs(o, stdout); err != nil { // --cpuprofile: parseSweep refuses the other files
		return err
	}
	made := missingDirs(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return usageError{fmt.Errorf("--out-dir %s: %w", dir, err)}
	}
	defer func() {
		if err != nil {
			for _, d := range made { // deepest first; only those the sweep left empty
				os.Remove(d)
			}
		}
	}()
	for _, name := range []string{"sweep.json", "sweep.csv", "sweep.png", "sweep.svg"} { // every file written at the end, checked before any point runs
		if err := atomicfile.Check(filepath.Join(dir, name)); err != nil {
			return usageError{fmt.Errorf("--out-dir %s: cannot write %s there: %w", dir, name, err)}
		}
	}
	// An earlier sweep's points would sit beside this one's, unlisted in its sweep.json.
	var old []string // not filepath.Glob: dir's name may hold its metacharacters ("runs[1]")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "point-") {
			old = append(old, filepath.Join(dir, e.Name()))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sweep.json")); err == nil {
		old = append(old, filepath.Join(dir, "sweep.json"))
	}
	if len(old) > 0 {
		return usageError{fmt.Errorf("--out-dir %s holds an earlier sweep's files (%s and %d more): give a new directory, or empty it", dir, filepath.Base(old[0]), len(old)-1)}
	}
	if p := o.CPUProfilePath; p != "" && sameDir(filepath.Dir(p), dir) {
		return usageError{fmt.Errorf("--cpuprofile %s is in --out-dir %s, whose files the sweep writes: put it elsewhere", p, dir)}
	}
	return withCPUProfile(o.CPUProfilePath, func() error { return sweepPoints(ctx, o, ax, dir, stdout, stderr) })
}

// missingDirs is dir and those of its parents that do not exist yet, deepest first: what
// os.MkdirAll(dir) makes.
func missingDirs(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			return out
		}
		out = append(out, d)
		if filepath.Dir(d) == d {
			return out
		}
	}
}

// sweepPoints runs the points in turn, then prints the table and writes the files of those
// that finished.
func sweepPoints(ctx context.Context, o options, ax sweepAxis, dir string, stdout, stderr io.Writer) error {
	tool := toolInfo()
	sw := sweepResult{Axis: ax.flag, AxisName: ax.name, Goodput: bench.FormatGoodput(o.slos), Version: tool.Version, Commit: tool.Commit}
	bar := newProgressBar(stderr, len(ax.values))
	var runErr error
	wls := &bench.Workloads{} // no axis changes the prompts: the points make them once
	for k, v := range ax.values {
		if ctx.Err() != nil { // a signal as the last point ended: start no other
			runErr = bench.ErrInterrupted
			break
		}
		bar.start(k, fmt.Sprintf("%s %s", ax.flag, plot.Label(v)))
		p := o
		ax.apply(&p, v)
		pt, err := runPoint(ctx, p, wls, dir, k, v)
		if err != nil {
			runErr = fmt.Errorf("--%s %s: %w", ax.flag, plot.Label(v), err)
			if k == 0 && (errors.Is(err, bench.ErrBadConfig) || errors.Is(err, bench.ErrNothingSucceeded) || neverRan(dir, k, v, pt)) {
				// A misconfiguration that measured nothing (or an engine, model or server that
				// never started), named on stderr: its log would only make the directory look
				// like an earlier sweep's to the corrected command.
				for _, ext := range []string{".txt", ".json"} {
					os.Remove(filepath.Join(dir, pointBase(k, v)+ext))
				}
			}
			break
		}
		sw.Model, sw.Device = pt.model, pt.device
		sw.Points = append(sw.Points, pt.sweepPoint)
		bar.done(k + 1)
	}
	bar.finish()
	if len(sw.Points) > 0 {
		if err := writeSweepTable(stdout, sw); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("stdout: %w", err))
		}
		if err := sw.write(dir); err != nil {
			runErr = errors.Join(runErr, err)
		} else {
			fmt.Fprintf(stderr, "rosetop: sweep: %d points in %s (sweep.json, sweep.csv, sweep.png, sweep.svg)\n", len(sw.Points), dir)
		}
	}
	if errors.Is(runErr, bench.ErrInterrupted) {
		fmt.Fprintf(stderr, "rosetop: sweep interrupted: %d of %d points finished (their files are in %s)\n", len(sw.Points), len(ax.values), dir)
		return bench.ErrInterrupted
	}
	return runErr
}

// sameDir reports whether a and b name one directory (b exists; a need not).
func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// pointRun is one point's row and what it ran on.
type pointRun struct {
	sweepPoint
	model, device string
}

// runPoint runs one point, its workload from wls; its report and progress go to point-K.txt, its
// records to point-K.json.
func runPoint(ctx context.Context, o options, wls *bench.Workloads, dir string, k int, v float64) (pointRun, error) {
	base := pointBase(k, v)
	o.JSONPath = filepath.Join(dir, base+".json")
	log := &lockedBuffer{}
	prov, err := o.provider()
	if err != nil {
		return pointRun{}, err
	}
	// Every request of a later point failing is a result (the load is past what the server
	// takes); of the first, a misconfiguration, which stops the sweep.
	res, err := bench.Measure(ctx, o.sessionConfig(), bench.SessionOptions{Provider: prov, KeepFailedRuns: k > 0, Workloads: wls}, o.exports(), log, log)
	if werr := atomicfile.Write(filepath.Join(dir, base+".txt"), func(w io.Writer) error {
		_, err := io.WriteString(w, log.String())
		return err
	}); werr != nil {
		err = errors.Join(err, werr)
	}
	if err != nil {
		return pointRun{sweepPoint: sweepPoint{Runs: len(res.Runs)}}, err // Runs: what it measured before failing
	}
	return pointRun{sweepPoint: newSweepPoint(v, base+".json", res.Runs), model: res.Model, device: res.Device}, nil
}

// neverRan reports whether point k's session never ran a run: no measured run, and no records
// written (a model, device or server that could not be started).
func neverRan(dir string, k int, v float64, pt pointRun) bool {
	_, err := os.Lstat(filepath.Join(dir, pointBase(k, v)+".json"))
	return pt.Runs == 0 && errors.Is(err, fs.ErrNotExist)
}

// pointBase is the name of point k's files, less their extension.
func pointBase(k int, v float64) string { return fmt.Sprintf("point-%02d-%s", k+1, plot.Label(v)) }

// lockedBuffer is a point's log: the report (session goroutine) and the progress notes (the
// caller's) write to it from two goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder // guarded by mu
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// progressBar draws "[####......] k/n name  elapsed, ETA" on stderr: redrawn in place on a
// terminal, a line per point elsewhere (CI logs).
type progressBar struct {
	w       io.Writer
	n       int
	tty     bool
	started time.Time
	name    string
}

func newProgressBar(w io.Writer, n int) *progressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progressBar{w: w, n: n, tty: tty, started: time.Now()}
}

func (b *progressBar) start(k int, name string) {
	b.name = name
	b.draw(k, "running")
}

func (b *progressBar) done(k int) { b.draw(k, "done") }

func (b *progressBar) draw(k int, state string) {
	const width = 20
	fill := width * k / max(b.n, 1)
	elapsed := time.Since(b.started)
	eta := "ETA --"
	if k > 0 && k < b.n {
		eta = "ETA " + (elapsed / time.Duration(k) * time.Duration(b.n-k)).Round(time.Second).String()
	} else if k == b.n {
		eta = "done"
	}
	line := fmt.Sprintf("rosetop: sweep [%s%s] %d/%d %s %s, %s elapsed, %s", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		k, b.n, b.name, state, elapsed.Round(100*time.Millisecond), eta)
	if b.tty {
		fmt.Fprintf(b.w, "\r\x1b[K%s", line)
		return
	}
	fmt.Fprintln(b.w, line)
}

func (b *progressBar) finish() {
	if b.tty {
		fmt.Fprintln(b.w)
	}
}
