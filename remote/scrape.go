package remote

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"rosetop/internal/oneline"
	"strconv"
	"strings"
	"time"
)

// ScraperConfig configures a Scraper. Zero fields take the defaults noted.
type ScraperConfig struct {
	URL      string        // the /metrics page, e.g. from DefaultMetricsURL
	APIKey   Secret        // sent as a bearer token when set
	Timeout  time.Duration // each scrape's deadline (2 s)
	MaxBytes int64         // the largest page read (16 MiB)
	Clock    Clock         // stamps Snapshot.At; nil: a monotonic clock started by NewScraper
}

// Scraper defaults.
const (
	DefaultScrapeTimeout = 2 * time.Second
	DefaultScrapeBytes   = 16 << 20
)

// Scraper reads a server's /metrics into Snapshots. It is safe for concurrent use.
type Scraper struct {
	cfg       ScraperConfig // read-only after NewScraper, defaults applied
	auth      string
	clock     Clock
	http      *http.Client
	transport *http.Transport
}

// NewScraper checks cfg and builds a scraper. It makes no request.
func NewScraper(cfg ScraperConfig) (*Scraper, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%w: metrics URL %q: want an http or https URL like http://host:8000/metrics",
			ErrConfig, redactURL(cfg.URL))
	}
	if cfg.Timeout < 0 || cfg.MaxBytes < 0 {
		return nil, fmt.Errorf("%w: negative limit in scraper config", ErrConfig)
	}
	cfg.Timeout = orDefault(cfg.Timeout, DefaultScrapeTimeout)
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultScrapeBytes
	}
	s := &Scraper{cfg: cfg, clock: cfg.Clock}
	if s.clock == nil {
		s.clock = monoClock{epoch: time.Now()}
	}
	if cfg.APIKey != "" {
		s.auth = "Bearer " + string(cfg.APIKey)
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	s.transport = &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: cfg.Timeout,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     90 * time.Second,
	}
	s.http = &http.Client{Transport: s.transport}
	return s, nil
}

// Close drops the scraper's idle connection.
func (s *Scraper) Close() { s.transport.CloseIdleConnections() }

// Scrape fetches and maps the page once, within the configured deadline. Errors wrap
// ErrConnect, ErrTimeout, ErrStreamCut, ErrStatus, ErrMalformed or (the caller's context ended)
// ErrCanceled.
func (s *Scraper) Scrape(ctx context.Context) (Snapshot, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.Timeout, errRequestDeadline)
	defer cancel()
	var conn connTrace
	req, err := http.NewRequestWithContext(conn.trace(ctx), http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if s.auth != "" {
		req.Header.Set("Authorization", s.auth)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return Snapshot{}, s.fail(ctx, err, conn.reached())
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxJSONReply))
		return Snapshot{}, fmt.Errorf("GET %s: %w", s.cfg.URL, &Failure{Reason: ReasonStatus, Status: resp.StatusCode,
			Detail: oneline.Clip(oneline.Fold(bodyDetail(b)), maxDetail), RetryAfter: retryAfter(resp.Header, time.Now())})
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxBytes+1))
	if err != nil {
		return Snapshot{}, s.fail(ctx, err, reachedAnswer)
	}
	if int64(len(body)) > s.cfg.MaxBytes {
		return Snapshot{}, fmt.Errorf("%w: GET %s: page over %d bytes", ErrMalformed, s.cfg.URL, s.cfg.MaxBytes)
	}
	snap, err := ParseSnapshot(bytes.NewReader(body), s.clock.Now())
	if err == nil && !snap.Started.Known {
		snap.Started = startHeader(resp.Header)
	}
	return snap, err
}

// startHeader is the Process-Start-Time-Unix header of a /metrics answer (client_golang's
// promhttp with ProcessStartTime; llama-server, whose value is its start in µs on a monotonic
// clock), a positive number; unknown without one.
func startHeader(h http.Header) Value {
	v, err := strconv.ParseFloat(strings.TrimSpace(h.Get("Process-Start-Time-Unix")), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 1) {
		return Value{}
	}
	return Value{V: v, Known: true}
}

// fail classifies a transport error of a scrape; at is how far it got: a connection closed or
// reset before the answer, or one cut during it, is a stream cut; anything else a connect failure.
func (s *Scraper) fail(ctx context.Context, err error, at reached) error {
	f := &Failure{Reason: ReasonConnect, Detail: oneline.Clip(oneline.Fold(err.Error()), maxDetail)}
	switch {
	case context.Cause(ctx) == errRequestDeadline:
		f.Reason, f.Phase = ReasonTimeout, PhaseRequest
	case ctx.Err() != nil: // the caller's: an interrupt, not the server's doing
		f.Reason = ReasonCanceled
	case at == reachedConn && dropped(err):
		f.Reason, f.Unanswered = ReasonStreamCut, true
		f.Detail = oneline.Clip("the server closed the connection without answering: "+oneline.Fold(err.Error()), maxDetail)
	case at == reachedAnswer:
		f.Reason = ReasonStreamCut
	}
	return fmt.Errorf("GET %s: %w", s.cfg.URL, f)
}

// DefaultMetricsURL is the /metrics page on an API root's host: http://h:8000/v1 gives
// http://h:8000/metrics.
func DefaultMetricsURL(baseURL string) (string, error) {
	base, err := normalizeBase(baseURL)
	if err != nil {
		return "", err
	}
	u, _ := url.Parse(base)
	u.Path = "/metrics"
	return u.String(), nil
}
