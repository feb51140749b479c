package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"rosetop/bench"
	"rosetop/engine/tokenizer"
	"rosetop/internal/oneline"
)

// DefaultScrapeEvery is how often a Provider's servers read /metrics.
const DefaultScrapeEvery = 500 * time.Millisecond

// ProviderOptions say which server a Provider drives and how it watches it.
type ProviderOptions struct {
	// Client is the connection: BaseURL, APIKey, Extra, timeouts, pool. Its Clock and Tokenizer
	// are the Provider's own: the session's clock, and Tokenizer below.
	Client Config
	API    API
	Model  string // "": the first id of GET {base}/models
	// MetricsURL is the server's Prometheus page; "": DefaultMetricsURL of the endpoint, which a
	// server may not have (the panes then fall back to client-side counts). Given explicitly, it
	// must answer at start.
	MetricsURL string
	// Tokenizer counts tokens the server does not (see LoadTokenizer): "" is GPT-2's.
	Tokenizer   string
	ScrapeEvery time.Duration // 0: DefaultScrapeEvery
	// Watch: the servers send no generation request, and only read /metrics, which must answer
	// at start with names rosetop knows (ErrNoMetrics otherwise).
	Watch bool
	// Fleet, with Watch, are the API roots of further servers watched beside Client.BaseURL's,
	// each at its DefaultMetricsURL, as one fleet (bench.RemoteInfo.Fleet). Not with MetricsURL.
	Fleet []string
}

// ErrNoMetrics is returned by Prepare for a watching Provider (ProviderOptions.Watch) whose
// server's metrics page is absent, fails, or names nothing rosetop knows.
var ErrNoMetrics = errors.New("--watch needs the server's Prometheus metrics")

// Provider is the bench.Provider of an OpenAI-compatible server outside this process: Prepare
// connects and learns the model and the server's kind; each NewServer is a client of it.
type Provider struct {
	opts     ProviderOptions // immutable after NewProvider, defaults applied
	base     string          // the API root
	explicit bool            // MetricsURL was given

	// Set by Prepare on the session's goroutine; read-only afterwards.
	tok      *tokenizer.Tokenizer
	model    string
	maxLen   int        // max_model_len from the model card; 0: not said
	kind     ServerKind // from the first scrape
	note     string     // why there are no server metrics; "" when the first scrape worked
	first    *Snapshot  // the first scrape: the baseline of the server's counters; nil without one
	firstErr error      // why the first scrape failed

	// members are a fleet's other servers (ProviderOptions.Fleet), each a watching Provider of
	// its own, prepared with this one (on goroutines Prepare waits for); nil for one server. Set
	// by NewProvider; read-only afterwards, as is inFleet.
	members []*Provider
	inFleet bool // one of another Provider's members

	mu     sync.Mutex // guards ledger
	ledger []bench.LedgerEntry
}

var _ bench.Provider = (*Provider)(nil)

// NewProvider checks o and returns a Provider. It makes no request.
func NewProvider(o ProviderOptions) (*Provider, error) {
	c, err := New(o.Client)
	if err != nil {
		return nil, err
	}
	if o.API != Completions && o.API != Chat {
		return nil, fmt.Errorf("%w: API %d", ErrConfig, int(o.API))
	}
	p := &Provider{opts: o, base: c.BaseURL(), explicit: o.MetricsURL != ""}
	if p.opts.MetricsURL == "" {
		if p.opts.MetricsURL, err = DefaultMetricsURL(p.base); err != nil {
			return nil, err
		}
	}
	if _, err := NewScraper(ScraperConfig{URL: p.opts.MetricsURL}); err != nil {
		return nil, err
	}
	if o.ScrapeEvery < 0 {
		return nil, fmt.Errorf("%w: scrape interval %v", ErrConfig, o.ScrapeEvery)
	}
	if p.opts.ScrapeEvery == 0 {
		p.opts.ScrapeEvery = DefaultScrapeEvery
	}
	if len(o.Fleet) > 0 {
		if err := p.addMembers(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// MaxFleet bounds the servers one session watches: each is a scrape loop and a table row.
const MaxFleet = 64

// addMembers makes a watching Provider for each of the fleet's other servers.
func (p *Provider) addMembers() error {
	o := p.opts
	switch {
	case !o.Watch:
		return fmt.Errorf("%w: several servers are only watched (--watch), not driven", ErrConfig)
	case p.explicit:
		return fmt.Errorf("%w: a metrics URL names one server's page, not a fleet's (each is read at its endpoint's /metrics)", ErrConfig)
	case len(o.Fleet)+1 > MaxFleet:
		return fmt.Errorf("%w: %d servers to watch, at most %d", ErrConfig, len(o.Fleet)+1, MaxFleet)
	}
	seen := map[string]bool{p.base: true}
	// Endpoints on one host and port (paths behind a proxy) share its /metrics page: a server
	// read twice would count twice in the sums.
	pages := map[string]string{strings.ToLower(p.opts.MetricsURL): p.base}
	for _, base := range o.Fleet {
		mo := ProviderOptions{Client: o.Client, API: o.API, Model: o.Model, Tokenizer: o.Tokenizer, ScrapeEvery: o.ScrapeEvery, Watch: true}
		mo.Client.BaseURL = base
		m, err := NewProvider(mo)
		if err != nil {
			return err
		}
		m.inFleet = true
		if seen[m.base] {
			return fmt.Errorf("%w: server %s given twice", ErrConfig, m.base)
		}
		seen[m.base] = true
		page := strings.ToLower(m.opts.MetricsURL)
		if other, ok := pages[page]; ok {
			return fmt.Errorf("%w: %s and %s have one /metrics page (%s): watch each server once, at its own host and port", ErrConfig, other, m.base, m.opts.MetricsURL)
		}
		pages[page] = m.base
		p.members = append(p.members, m)
	}
	return nil
}

// Prepare loads the tokenizer, asks the server for its models (a refused connection is an
// error wrapping ErrConnect), picks the model and reads /metrics once to learn the server's
// kind. Calling it again does nothing.
func (p *Provider) Prepare(ctx context.Context, progress io.Writer) error {
	if p.tok != nil {
		return nil
	}
	tok, err := LoadTokenizer(ctx, p.opts.Tokenizer, progress)
	if err != nil {
		return err
	}
	if err := p.pickModel(ctx, progress); err != nil {
		return err
	}
	if err := p.firstScrape(ctx); err != nil {
		return err
	}
	p.tok = tok
	what := p.kind.String()
	if p.kind == KindUnknown {
		what = "server"
	}
	limit := "max_model_len not given"
	if p.maxLen > 0 {
		limit = fmt.Sprintf("max_model_len %d", p.maxLen)
	}
	if p.opts.Watch {
		fmt.Fprintf(progress, "rosetop: watching %s at %s (%s), model %s: no requests are sent\n", what, p.base, p.opts.MetricsURL, p.model)
		return p.prepareMembers(ctx, progress)
	}
	fmt.Fprintf(progress, "rosetop: %s at %s, model %s (%s), %s API\n", what, p.base, p.model, limit, p.opts.API)
	if p.note != "" {
		fmt.Fprintf(progress, "rosetop: %s: the panes show client-side counts\n", p.note)
	}
	return nil
}

// prepareMembers learns each fleet member's model and kind, all at once (each call has its own
// deadline); their lines follow in the fleet's order. Every server must answer at start, as one
// watched alone must.
func (p *Provider) prepareMembers(ctx context.Context, progress io.Writer) error {
	outs := make([]bytes.Buffer, len(p.members))
	errs := make([]error, len(p.members))
	var wg sync.WaitGroup
	for i, m := range p.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = m.pickModel(ctx, &outs[i]); errs[i] == nil {
				errs[i] = m.firstScrape(ctx)
			}
			if errs[i] == nil {
				fmt.Fprintf(&outs[i], "rosetop: watching %s at %s (%s), model %s: no requests are sent\n", m.kind, m.base, m.opts.MetricsURL, m.model)
			}
		}()
	}
	wg.Wait()
	for i := range p.members {
		progress.Write(outs[i].Bytes())
		if errs[i] != nil {
			return errs[i]
		}
	}
	return nil
}

// pickModel reads GET {base}/models and chooses the model to ask for.
func (p *Provider) pickModel(ctx context.Context, progress io.Writer) error {
	c, err := New(p.opts.Client)
	if err != nil {
		return err
	}
	defer c.Close()
	t0 := time.Now()
	cards, err := c.ModelCards(ctx)
	if err != nil {
		var f *Failure
		errors.As(err, &f)
		if p.opts.Model != "" && f != nil && f.Reason == ReasonStatus {
			// The server answers but lists no models: the named one may still serve.
			fmt.Fprintf(progress, "rosetop: %v; asking for model %s anyway\n", err, p.opts.Model)
			p.model = p.opts.Model
			return nil
		}
		if f != nil && (f.Reason == ReasonConnect || f.Reason == ReasonTimeout) {
			return fmt.Errorf("cannot reach the server at %s: %w", p.base, f)
		}
		return fmt.Errorf("the server at %s: %w", p.base, err)
	}
	detail := "GET /models"
	if p.inFleet || p.members != nil { // which server's
		detail = "GET " + p.base + "/models"
	}
	p.addLedger("connect", detail, time.Since(t0))
	if len(cards) == 0 && p.opts.Model == "" {
		return fmt.Errorf("%w: GET %s/models lists no model: name one with --model", ErrMalformed, p.base)
	}
	p.model = p.opts.Model
	if p.model == "" {
		p.model = cards[0].ID
		// The id goes into the start-up line and the reports as it is: one a terminal would act
		// on (a control character: an escape, a newline) is no model name to print.
		if id := p.model; strings.ContainsFunc(id, unicode.IsControl) {
			return fmt.Errorf("%w: GET %s/models lists a model id that is not printable text (%q): name the model with --model",
				ErrMalformed, p.base, oneline.Clip(id, 80))
		}
	}
	ids := make([]string, len(cards))
	for i, m := range cards {
		ids[i] = m.ID
		if m.ID == p.model {
			p.maxLen = m.MaxModelLen
		}
	}
	if p.opts.Model != "" && !slices.Contains(ids, p.model) {
		fmt.Fprintf(progress, "rosetop: model %s is not among the server's models (%s); asking for it anyway\n", p.model, strings.Join(ids, ", "))
	}
	return nil
}

// firstScrape reads /metrics once. A failure is an error only for an explicit metrics URL, and
// in watch mode, which also needs a page rosetop recognises.
func (p *Provider) firstScrape(ctx context.Context) error {
	sc, err := NewScraper(ScraperConfig{URL: p.opts.MetricsURL, APIKey: p.metricsKey()})
	if err != nil {
		return err
	}
	defer sc.Close()
	t0 := time.Now()
	snap, err := sc.Scrape(ctx)
	switch {
	case err != nil && ctx.Err() != nil: // interrupted: no note about the page, which was never read
		return fmt.Errorf("GET %s: %w", p.opts.MetricsURL, ctx.Err())
	case err != nil && p.opts.Watch && (p.members != nil || p.inFleet):
		return fmt.Errorf("%w: %s: %w", ErrNoMetrics, p.opts.MetricsURL, err)
	case err != nil && p.opts.Watch:
		return fmt.Errorf("%w: %w (give their address with --metrics-url)", ErrNoMetrics, err)
	case err == nil && p.opts.Watch && snap.Kind == KindUnknown:
		return fmt.Errorf("%w: %s names none that rosetop knows (vLLM, SGLang, TGI, llama.cpp, rosetop serve, Dynamo frontend, SGLang router)", ErrNoMetrics, p.opts.MetricsURL)
	}
	if err != nil {
		if p.explicit {
			return fmt.Errorf("--metrics-url: %w", err)
		}
		p.note, p.firstErr = fmt.Sprintf("no server metrics (%v)", err), err
		return nil
	}
	p.addLedger("first scrape", "GET "+p.opts.MetricsURL, time.Since(t0))
	p.kind, p.first = snap.Kind, &snap
	if snap.Kind == KindUnknown {
		p.note = "the server's /metrics name nothing rosetop knows"
	}
	return nil
}

// metricsKey is the API key for the metrics page: sent only to the endpoint's own host, never
// to another one named by --metrics-url.
func (p *Provider) metricsKey() Secret {
	a, errA := url.Parse(p.base)
	b, errB := url.Parse(p.opts.MetricsURL)
	if errA != nil || errB != nil || a.Scheme != b.Scheme || a.Host != b.Host {
		return ""
	}
	return p.opts.Client.APIKey
}

func (p *Provider) addLedger(what, detail string, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger = append(p.ledger, bench.LedgerEntry{What: what, Detail: detail, Took: took, At: time.Now()})
}

// Model describes the prepared model: the tokenizer's vocabulary, and the server's
// max_model_len where it gave one (else no limit of rosetop's own).
func (p *Provider) Model() bench.ModelInfo {
	positions := p.maxLen
	if positions == 0 {
		positions = math.MaxInt32
	}
	return bench.ModelInfo{Codec: p.tok, Vocab: p.tok.VocabSize(), MaxPositions: positions, EOS: p.tok.EOS()}
}

// Ledger is the connection's one-time costs: the first GET /models and /metrics (of each server
// of a fleet).
func (p *Provider) Ledger() []bench.LedgerEntry {
	p.mu.Lock()
	out := append([]bench.LedgerEntry(nil), p.ledger...)
	p.mu.Unlock()
	for _, m := range p.members { // a fleet's other servers, in its order
		out = append(out, m.Ledger()...)
	}
	return out
}

// Close releases nothing: each server closes its own connections.
func (p *Provider) Close() error { return nil }

// info describes a server built with spec for headers and reports.
func (p *Provider) info(spec bench.ServerSpec) bench.ServerInfo {
	where := p.kind.String() + " at " + p.base
	if p.kind == KindUnknown {
		where = "server at " + p.base
	}
	r := &bench.RemoteInfo{Endpoint: p.base, API: p.opts.API.String(), Kind: p.kind.String(), ServerFirsts: p.kind.countsFirstTokens(), Watch: p.opts.Watch}
	model := p.model
	if p.members != nil {
		r.Fleet = []string{p.base}
		models := []string{p.model}
		for _, m := range p.members {
			r.Fleet = append(r.Fleet, m.base)
			if m.kind != p.kind {
				r.Kind = "mixed"
			}
			r.ServerFirsts = r.ServerFirsts && m.kind.countsFirstTokens()
			if !slices.Contains(models, m.model) {
				models = append(models, m.model)
			}
		}
		where = fmt.Sprintf("%d servers (%s) from %s", len(r.Fleet), r.Kind, p.base)
		model = strings.Join(models[:min(3, len(models))], ", ")
		if len(models) > 3 {
			model += fmt.Sprintf(" and %d more", len(models)-3)
		}
	}
	return bench.ServerInfo{
		Model: model, Device: "remote", DeviceDetail: where, MaxBatch: spec.MaxBatch, Backend: p.opts.API.backend(), Remote: r,
	}
}
