// Package remote drives an OpenAI-compatible inference server (vLLM, SGLang, TGI, llama.cpp,
// Ollama, rosetop serve) and watches it: a streaming client that times every chunk as vLLM
// bench serve does, and a Prometheus /metrics scraper that maps each server's names onto one
// snapshot.
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"rosetop/internal/oneline"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
)

// Tokenizer counts output tokens when the server reports no usage; *tokenizer.Tokenizer is one.
// It must be safe for concurrent use.
type Tokenizer interface {
	Encode(text string) []int32
}

// Clock is a monotonic clock: time since some fixed epoch, read from every goroutine.
type Clock interface {
	Now() time.Duration
}

// Secret is a credential. It prints as "[redacted]" however it is formatted.
type Secret string

func (Secret) String() string   { return "[redacted]" }
func (Secret) GoString() string { return `"[redacted]"` }

// MarshalText keeps a Secret out of JSON and other text exports.
func (Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// Config configures a Client. Zero durations and sizes take the defaults noted.
type Config struct {
	// BaseURL is the API root, e.g. http://host:8000/v1; a URL with no path gets /v1.
	BaseURL string
	APIKey  Secret    // sent as a bearer token when set
	Extra   ExtraBody // merged into every request body
	// MaxConns is how many streams run at once; the connection pool keeps that many (64).
	MaxConns int

	ConnectTimeout   time.Duration // dial + TLS handshake (10 s)
	FirstByteTimeout time.Duration // POST to the first byte of the body (off: RequestTimeout bounds it)
	StallTimeout     time.Duration // between two reads of the body (off: RequestTimeout bounds it)
	RequestTimeout   time.Duration // the whole request (10 min)

	Tokenizer Tokenizer // counts output tokens when usage is missing; nil: not counted
	Clock     Clock     // nil: a monotonic clock started by New

	MaxLineBytes    int // longest SSE line or event accepted (1 MiB)
	ReadBufferBytes int // the SSE reader's buffer per stream (16 KiB)
}

// Defaults for Config's zero fields.
const (
	DefaultMaxConns        = 64
	DefaultConnectTimeout  = 10 * time.Second
	DefaultRequestTimeout  = 10 * time.Minute
	DefaultMaxLineBytes    = 1 << 20
	DefaultReadBufferBytes = 16 << 10
	metaTimeout            = 30 * time.Second // GET /v1/models
	maxMetaBody            = 1 << 20
	drainAfterDone         = 64 << 10 // body bytes read after [DONE] to keep the connection
	drainGrace             = time.Second
)

// Client sends streaming completion requests. It is safe for concurrent use; each Do is one
// request on one pooled HTTP/1.1 connection.
type Client struct {
	cfg       Config // read-only after New, defaults applied
	base      string // BaseURL without a trailing slash
	auth      string // "Bearer <key>" or ""; never printed
	clock     Clock
	http      *http.Client
	transport *http.Transport
}

type monoClock struct{ epoch time.Time }

func (c monoClock) Now() time.Duration { return time.Since(c.epoch) }

// New checks cfg and builds a client. It makes no request.
func New(cfg Config) (*Client, error) {
	base, err := normalizeBase(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.MaxConns < 0 || cfg.ConnectTimeout < 0 || cfg.FirstByteTimeout < 0 ||
		cfg.StallTimeout < 0 || cfg.RequestTimeout < 0 || cfg.MaxLineBytes < 0 || cfg.ReadBufferBytes < 0 {
		return nil, fmt.Errorf("%w: negative limit in client config", ErrConfig)
	}
	cfg.MaxConns = orDefault(cfg.MaxConns, DefaultMaxConns)
	cfg.ConnectTimeout = orDefault(cfg.ConnectTimeout, DefaultConnectTimeout)
	cfg.RequestTimeout = orDefault(cfg.RequestTimeout, DefaultRequestTimeout)
	cfg.MaxLineBytes = orDefault(cfg.MaxLineBytes, DefaultMaxLineBytes)
	cfg.ReadBufferBytes = orDefault(cfg.ReadBufferBytes, DefaultReadBufferBytes)
	c := &Client{cfg: cfg, base: base, clock: cfg.Clock}
	if c.clock == nil {
		c.clock = monoClock{epoch: time.Now()}
	}
	if cfg.APIKey != "" {
		c.auth = "Bearer " + string(cfg.APIKey)
	}
	c.transport = newTransport(cfg)
	c.http = &http.Client{Transport: c.transport, CheckRedirect: keepMethod}
	return c, nil
}

// keepMethod follows a redirect only where it keeps the request's method (307 and 308, or
// any for a GET): a 301, 302 or 303 would turn the POST into a GET without its body, and the
// server's answer to that GET would hide the redirect. Those are answered as they came.
func keepMethod(req *http.Request, via []*http.Request) error {
	if req.Method != via[0].Method {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// maxRedirects is net/http's own limit.
const maxRedirects = 10

func orDefault[T int | time.Duration](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

// newTransport is an HTTP/1.1 keep-alive pool for cfg.MaxConns concurrent streams, with the
// system's TLS roots and the environment's proxy settings.
func newTransport(cfg Config) *http.Transport {
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: cfg.ConnectTimeout,
		MaxIdleConns:        cfg.MaxConns,
		MaxIdleConnsPerHost: cfg.MaxConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // an event stream must arrive as it is written
		Protocols:           protocols,
	}
}

// normalizeBase checks an API root and trims its trailing slash.
func normalizeBase(raw string) (string, error) {
	u, err := url.Parse(raw)
	// A URL holds no white space: one in raw is a pasting slip, not a path to escape.
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsFunc(raw, unicode.IsSpace) {
		return "", fmt.Errorf("%w: endpoint %q: want an http or https URL like http://host:8000/v1",
			ErrConfig, redactURL(raw))
	}
	if u.User != nil {
		return "", fmt.Errorf("%w: endpoint %q: put credentials in the API key, not the URL", ErrConfig, redactURL(raw))
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if u.Path == "" {
		u.Path = "/v1"
	}
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}

// redactURL drops anything that may be a credential from a URL for a message.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		u.User = url.User("[redacted]")
		return u.String()
	}
	return oneline.Clip(raw, 80)
}

// BaseURL is the API root requests go to.
func (c *Client) BaseURL() string { return c.base }

// Close drops the pool's idle connections. Requests in flight are not affected.
func (c *Client) Close() { c.transport.CloseIdleConnections() }

// Causes of the request context's cancellation, told apart by classify.
var (
	errFirstByte       = errors.New("no first byte in time")
	errStall           = errors.New("stream stalled")
	errRequestDeadline = errors.New("request deadline")
	errMetaDeadline    = errors.New("metadata request deadline")
	errDrain           = errors.New("body still open after [DONE]")
)

// Do sends r and reads its stream to the end, calling onChunk (when not nil) on Do's goroutine
// for every chunk that carries choices, as it arrives. The Result is complete either way; the
// error is nil on success, else the Result's *Failure. An error wrapping ErrConfig means r was
// not sent and the Result is empty.
func (c *Client) Do(ctx context.Context, r Request, onChunk func(Chunk)) (Result, error) {
	if err := r.validate(); err != nil {
		return Result{}, err
	}
	body, err := r.body(c.cfg.Extra)
	if err != nil {
		return Result{}, err
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rctx, stop := context.WithTimeoutCause(rctx, c.cfg.RequestTimeout, errRequestDeadline)
	defer stop()
	var conn connTrace
	req, err := http.NewRequestWithContext(conn.trace(rctx), http.MethodPost, c.base+r.API.path(), bytes.NewReader(body))
	if err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}

	res := Result{PromptTokens: -1, OutputTokens: -1}
	watch := newWatchdog(cancel, c.cfg.FirstByteTimeout, c.cfg.StallTimeout)
	defer watch.stop()
	res.Start = c.clock.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		res.End = c.clock.Now()
		res.Failure = c.classify(ctx, rctx, err, conn.reached())
		return res, res.Failure
	}
	defer resp.Body.Close()
	res.Headers, res.Status = c.clock.Now(), resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		res.Failure = c.statusFailure(resp)
		res.End = c.clock.Now()
		return res, res.Failure
	}
	if mediaType(resp.Header) == "application/json" {
		res.Failure = c.notAStream(resp)
		res.End = c.clock.Now()
		return res, res.Failure
	}
	// The client asks for no compression (an encoded stream cannot be timed chunk by chunk).
	if enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); enc != "" && enc != "identity" {
		msg := fmt.Sprintf("the server sent the stream %s-encoded (Content-Encoding), unasked: rosetop reads plain event streams", oneline.Clip(enc, 40))
		res.Failure = &Failure{Reason: ReasonMalformedSSE, Detail: c.detail(msg)}
		res.End = c.clock.Now()
		return res, res.Failure
	}
	sr := newStreamReader(c, watch.body(resp.Body), &res, r.MaxTokens, onChunk)
	f, readErr := sr.run()
	res.End = c.clock.Now()
	if readErr != nil {
		f = c.classify(ctx, rctx, readErr, reachedAnswer)
	}
	if f != nil && f.Reason == ReasonStreamCut && len(res.Chunks) == 0 && sr.sse.Events == 0 {
		if ct := resp.Header.Get("Content-Type"); mediaType(resp.Header) != "text/event-stream" {
			f.Detail = c.detail(fmt.Sprintf("%s; the body is not an event stream (Content-Type %q)", f.Detail, ct))
		}
	}
	sr.finish(c.cfg.Tokenizer)
	if f != nil {
		f.Status = res.Status
		res.Failure = f
		return res, f
	}
	// What follows [DONE] is the end of the chunked body: read it so the connection is reused,
	// but give up soon on a server that keeps the body open.
	drain := time.AfterFunc(drainGrace, func() { cancel(errDrain) })
	_, _ = io.CopyN(io.Discard, resp.Body, drainAfterDone)
	drain.Stop()
	return res, nil
}

// reached is how far a request got before it failed.
type reached int

const (
	reachedNothing reached = iota // no connection: refused, DNS, TLS, a dial timeout
	reachedConn                   // a connection, on which the request went (or was going) out; no answer
	reachedAnswer                 // the response had arrived
)

// connTrace follows a request's attempts at a connection (net/http may retry a request on a new
// one): whether the latest got one, so that a server that takes the request and then closes the
// connection is not taken for one that cannot be reached.
type connTrace struct{ got atomic.Bool }

// trace is ctx with the hooks that feed t.
func (t *connTrace) trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) { t.got.Store(false) },
		GotConn: func(httptrace.GotConnInfo) { t.got.Store(true) },
	})
}

// reached is how far the request got, for a RoundTrip that returned no response.
func (t *connTrace) reached() reached {
	if t.got.Load() {
		return reachedConn
	}
	return reachedNothing
}

// classify turns a transport or read error into a Failure; at is how far the request got.
func (c *Client) classify(parent, rctx context.Context, err error, at reached) *Failure {
	if parent.Err() != nil {
		return &Failure{Reason: ReasonCanceled, Detail: c.detail(context.Cause(parent).Error())}
	}
	if rctx.Err() != nil {
		switch context.Cause(rctx) {
		case errFirstByte:
			return &Failure{Reason: ReasonTimeout, Phase: PhaseFirstByte, Detail: c.durationDetail(c.cfg.FirstByteTimeout)}
		case errStall:
			return &Failure{Reason: ReasonTimeout, Phase: PhaseStall, Detail: c.durationDetail(c.cfg.StallTimeout)}
		case errRequestDeadline:
			return &Failure{Reason: ReasonTimeout, Phase: PhaseRequest, Detail: c.durationDetail(c.cfg.RequestTimeout)}
		case errMetaDeadline:
			return &Failure{Reason: ReasonTimeout, Phase: PhaseRequest, Detail: c.durationDetail(c.metaDeadline())}
		}
	}
	if errors.Is(err, ErrMalformed) {
		return &Failure{Reason: ReasonMalformedSSE, Detail: c.detail(err.Error())}
	}
	switch {
	case at == reachedAnswer:
		return &Failure{Reason: ReasonStreamCut, Detail: c.detail(err.Error())}
	case at == reachedConn && dropped(err): // where the answer should be: the server dropped the request
		return &Failure{Reason: ReasonStreamCut, Unanswered: true,
			Detail: c.detail("the server closed the connection without answering: " + err.Error())}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Failure{Reason: ReasonTimeout, Phase: PhaseConnect, Detail: c.detail(err.Error())}
	}
	return &Failure{Reason: ReasonConnect, Detail: c.detail(err.Error())}
}

// dropped reports whether err is a connection closed or reset by the other end (not, say, an
// answer that is not HTTP, as an https port gives a plain-http request).
func dropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}

func (c *Client) durationDetail(d time.Duration) string { return "after " + d.String() }

// metaDeadline bounds a metadata request (GET /models): the shorter of metaTimeout and a request's.
func (c *Client) metaDeadline() time.Duration { return min(metaTimeout, c.cfg.RequestTimeout) }

// statusFailure records a non-200 answer with the message of the error object its body holds
// (vLLM's, SGLang's, TGI's, llama.cpp's and Ollama's shapes, see chunk), else the start of its
// body, and where a redirect that was not followed points.
func (c *Client) statusFailure(resp *http.Response) *Failure {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxJSONReply))
	detail := bodyDetail(b)
	if loc, err := resp.Location(); err == nil && resp.StatusCode >= 300 && resp.StatusCode < 400 {
		detail = fmt.Sprintf("redirected to %s, which a %s does not follow: give the endpoint as the server's new address",
			redactURL(loc.String()), resp.Request.Method)
	}
	return &Failure{Reason: ReasonStatus, Status: resp.StatusCode, Detail: c.detail(detail), RetryAfter: retryAfter(resp.Header, time.Now())}
}

// bodyDetail is what a refusal's body says: the message of the error object it holds (vLLM's,
// SGLang's, TGI's, llama.cpp's and Ollama's shapes, see chunk, or FastAPI's {"detail": "..."},
// its default answer to a path the server does not route), else the body as it is.
func bodyDetail(b []byte) string {
	var ch chunk
	if decodeChunk(bytes.TrimSpace(b), &ch) {
		if msg, ok := ch.errorMessage(); ok && strings.TrimSpace(msg) != "" {
			return msg
		}
	}
	var fastAPI struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(b, &fastAPI) == nil && strings.TrimSpace(fastAPI.Detail) != "" {
		return fastAPI.Detail
	}
	return string(b)
}

// MaxRetryAfter bounds the wait a Retry-After header may ask for: a broken or hostile server
// cannot park the session for a day.
const MaxRetryAfter = time.Minute

// retryAfter is the wait h's Retry-After asks for: whole seconds, or an HTTP-date taken
// against the answer's own Date (else now), so that the two clocks' offset does not count. It
// is at most MaxRetryAfter; 0 when absent, past or not understood.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		return time.Duration(min(n, uint64(MaxRetryAfter/time.Second))) * time.Second
	} else if errors.Is(err, strconv.ErrRange) {
		return MaxRetryAfter // all digits, past uint64
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	return min(max(at.Sub(now), 0), MaxRetryAfter)
}

// maxJSONReply bounds the JSON body read from a server that answered without streaming.
const maxJSONReply = 64 << 10

// notAStream records a 200 whose body is one JSON document instead of an event stream: an error
// object's message where it holds one (ReasonServerError), else malformed framing.
func (c *Client) notAStream(resp *http.Response) *Failure {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxJSONReply))
	var ch chunk
	if decodeChunk(bytes.TrimSpace(b), &ch) {
		if msg, ok := ch.errorMessage(); ok {
			return &Failure{Reason: ReasonServerError, Detail: c.detail(msg)}
		}
	}
	return &Failure{Reason: ReasonMalformedSSE, Detail: c.detail("the server answered with one JSON document (Content-Type application/json), not an event stream: " + string(b))}
}

// mediaType is the Content-Type header's media type, lower case, without parameters.
func mediaType(h http.Header) string {
	t, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// detail makes s fit a one-line message: no control characters, at most maxDetail bytes, and
// never the API key (a server may echo the Authorization header back in an error).
func (c *Client) detail(s string) string {
	if c.cfg.APIKey != "" {
		s = strings.ReplaceAll(s, string(c.cfg.APIKey), "[redacted]")
	}
	return oneline.Clip(oneline.Fold(s), maxDetail)
}

// ModelCard is one entry of GET {base}/models.
type ModelCard struct {
	ID string
	// MaxModelLen is the longest sequence (prompt plus output) the server takes for the model,
	// where it says (vLLM's and rosetop serve's max_model_len); 0 when it does not.
	MaxModelLen int
}

// ModelCards lists the models the server serves (GET {base}/models), in its order.
func (c *Client) ModelCards(ctx context.Context) ([]ModelCard, error) {
	mctx, cancel := context.WithTimeoutCause(ctx, c.metaDeadline(), errMetaDeadline)
	defer cancel()
	var conn connTrace
	req, err := http.NewRequestWithContext(conn.trace(mctx), http.MethodGet, c.base+"/models", nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s/models: %w", c.base, c.classify(ctx, mctx, err, conn.reached()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/models: %w", c.base, c.statusFailure(resp))
	}
	var list struct {
		Data []struct {
			ID          string          `json:"id"`
			MaxModelLen json.RawMessage `json:"max_model_len"` // read when it is a whole number

		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetaBody)).Decode(&list); err != nil {
		return nil, fmt.Errorf("%w: GET %s/models: %v", ErrMalformed, c.base, c.detail(err.Error()))
	}
	cards := make([]ModelCard, 0, len(list.Data))
	for _, m := range list.Data {
		if m.ID == "" {
			continue
		}
		card := ModelCard{ID: m.ID}
		if n, err := strconv.ParseInt(string(m.MaxModelLen), 10, 64); err == nil && n > 0 && n <= maxModelLen {
			card.MaxModelLen = int(n)
		}
		cards = append(cards, card)
	}
	return cards, nil
}

// maxModelLen bounds a max_model_len taken from a server: larger is not a length but a mistake.
const maxModelLen = 1 << 30

// Models lists the model ids the server serves (GET {base}/models), in its order.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	cards, err := c.ModelCards(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(cards))
	for i, m := range cards {
		ids[i] = m.ID
	}
	return ids, nil
}

// FirstModel is the first id of GET {base}/models: the --model default.
func (c *Client) FirstModel(ctx context.Context) (string, error) {
	ids, err := c.Models(ctx)
	if err != nil {
		return "", err
	}
	if len(ids) == 0 {
		return "", fmt.Errorf("%w: GET %s/models lists no model", ErrMalformed, c.base)
	}
	return ids[0], nil
}
