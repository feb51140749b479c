package serve

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBadOptions is wrapped by New's errors about Options.
var ErrBadOptions = errors.New("bad server options")

// errShutdown is the cause of a request context cancelled by Serve's shutdown.
var errShutdown = errors.New("the server is shutting down")

// Options configure a Server. Zero durations and sizes take the defaults in brackets.
type Options struct {
	// MaxQueue answers 429 (with Retry-After) to a generation request while this many requests
	// wait in the scheduler's queue (--max-queue); 0: no limit.
	MaxQueue     int
	RetryAfter   time.Duration // the 429's Retry-After, rounded up to whole seconds [1 s]
	MaxBodyBytes int64         // a larger body is answered 413 [1 MiB]
	// ReadTimeout bounds reading a request's headers and body; WriteTimeout writing each reply,
	// or each event of a stream [30 s each].
	ReadTimeout, WriteTimeout time.Duration
	IdleTimeout               time.Duration // how long a keep-alive connection may idle [120 s]
	// ShutdownTimeout is how long Serve lets in-flight requests run once its context is done,
	// before it cancels them (--shutdown-timeout) [30 s]; a negative one: no time, they are
	// cancelled at once.
	ShutdownTimeout time.Duration
	// OnDrain is called, on Serve's goroutine, when its shutdown begins with generations in
	// flight: how many, and how long they are let run. nil: not called.
	OnDrain func(inFlight int, grace time.Duration)
	Metrics *Metrics // served at GET /metrics; nil: 404 there
	// AllowedOrigins are the origins whose web pages may call the server (CORS, as vLLM's
	// --allowed-origins): "*" for any, else scheme://host[:port] or "null" (a file's page) each.
	// None: no CORS headers, and a browser keeps other origins' pages from reading the replies.
	AllowedOrigins []string
	// APIKeys, when any, guard the API as vLLM's --api-key: see apiKeys (auth.go).
	APIKeys []string
	// Version is GET /version's "version" (the build's module version); "": "unknown".
	Version string
	Log     *slog.Logger // one line per request (--log-requests); nil: none
	// ErrorLog takes net/http's own error lines (a failed accept, a query with a semicolon); nil:
	// Log's, else the standard logger's (stderr), which would draw over a dashboard there.
	ErrorLog *log.Logger
}

// Server answers OpenAI's completions and chat completions API over an Engine (see the package
// doc). Its handlers run concurrently; Serve runs it on a listener with a graceful shutdown.
type Server struct {
	eng   Engine
	model Model // eng.Model(), read once by New
	opts  Options
	cors  *cors    // Options.AllowedOrigins; nil: none
	keys  *apiKeys // Options.APIKeys; nil: the API is open

	draining  atomic.Bool   // set by Serve when its context is done: new generations and /health get 503
	admitting chan struct{} // capacity 1: held from a generation's MaxQueue check to its Submit's return (admit)
	inflight  tracker       // requests being handled, for Serve's shutdown
	stopNow   chan struct{} // closed by StopNow: a shutdown in progress cancels what is in flight
	stopOnce  sync.Once     // guards the close of stopNow
}

// New returns a Server over eng.
func New(eng Engine, o Options) (*Server, error) {
	if eng == nil {
		return nil, fmt.Errorf("%w: no engine", ErrBadOptions)
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	m := eng.Model()
	switch {
	case m.Tokenizer == nil:
		return nil, fmt.Errorf("%w: model %q has no tokenizer", ErrBadOptions, m.ID)
	case m.MaxSeqLen < 2 || m.VocabSize < 1:
		return nil, fmt.Errorf("%w: model %q: max sequence length %d, vocabulary %d; want >= 2 and >= 1", ErrBadOptions, m.ID, m.MaxSeqLen, m.VocabSize)
	}
	c, err := newCORS(o.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	if slices.Contains(o.APIKeys, "") {
		return nil, fmt.Errorf("%w: an empty API key (it would let in a request with none)", ErrBadOptions)
	}
	s := &Server{eng: eng, model: m, opts: o, cors: c, keys: newAPIKeys(o.APIKeys), admitting: make(chan struct{}, 1), stopNow: make(chan struct{})}
	s.inflight.cond = sync.NewCond(&s.inflight.mu)
	return s, nil
}

func (o *Options) defaults() error {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"retry after", &o.RetryAfter, time.Second},
		{"read timeout", &o.ReadTimeout, 30 * time.Second},
		{"write timeout", &o.WriteTimeout, 30 * time.Second},
		{"idle timeout", &o.IdleTimeout, 120 * time.Second},
	} {
		if *d.v < 0 {
			return fmt.Errorf("%w: %s %v, want >= 0", ErrBadOptions, d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	switch {
	case o.MaxQueue < 0:
		return fmt.Errorf("%w: --max-queue %d, want >= 0 (0: no limit)", ErrBadOptions, o.MaxQueue)
	case o.MaxBodyBytes < 0:
		return fmt.Errorf("%w: body limit %d bytes, want >= 0", ErrBadOptions, o.MaxBodyBytes)
	case o.MaxBodyBytes == 0:
		o.MaxBodyBytes = 1 << 20
	}
	return nil
}

// finishTimeout bounds how long, after a shutdown cancelled the requests in flight, their
// connections may take to send the end of their responses.
const finishTimeout = time.Second

// Serve answers requests on ln until ctx is done, then shuts down: it stops accepting, lets the
// requests in flight finish within Options.ShutdownTimeout, then cancels those left (their
// clients get a 503, or an error event in a stream), closes within finishTimeout the connections
// whose clients do not take that end, and returns once every handler has. It returns nil after
// such a shutdown, or the listener's error (after closing the connections and waiting for the
// handlers). Call it once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, hardStop := context.WithCancelCause(context.Background())
	defer hardStop(nil)
	hs := &http.Server{
		Handler: s.Handler(),
		// Bounds a body no handler reads too: net/http reads it before it answers.
		ReadTimeout:       s.opts.ReadTimeout,
		ReadHeaderTimeout: s.opts.ReadTimeout,
		// Bounds every reply net/http or a handler writes (/metrics, net/http's own 4xx); a stream
		// or a reply after a long generation sets its own deadline before it writes.
		WriteTimeout: s.opts.WriteTimeout,
		IdleTimeout:  s.opts.IdleTimeout,
		BaseContext:  func(net.Listener) context.Context { return base },
	}
	switch {
	case s.opts.ErrorLog != nil:
		hs.ErrorLog = s.opts.ErrorLog
	case s.opts.Log != nil:
		hs.ErrorLog = slog.NewLogLogger(s.opts.Log.Handler(), slog.LevelWarn)
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served: // the listener failed: close what is open and wait for the handlers
		hardStop(err)
		hs.Close()
		s.inflight.wait()
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	grace, cancel := context.WithTimeout(context.Background(), max(s.opts.ShutdownTimeout, 0))
	defer cancel()
	go func() {
		select {
		case <-s.stopNow:
			cancel()
		case <-grace.Done():
		}
	}()
	if n := s.inflight.count(); n > 0 && s.opts.OnDrain != nil && s.opts.ShutdownTimeout > 0 {
		s.opts.OnDrain(n, s.opts.ShutdownTimeout)
	}
	if err := hs.Shutdown(grace); err != nil {
		hardStop(errShutdown) // every request context is done: the handlers cancel their requests
		// The handlers end their responses (a 503, a stream's error event) and their connections
		// go idle, where Shutdown closes them. A connection still busy then, a handler stuck in a
		// write to a client that stopped reading, is closed: its write fails.
		finish, cancelFinish := context.WithTimeout(context.Background(), finishTimeout)
		defer cancelFinish()
		if hs.Shutdown(finish) != nil {
			hs.Close()
		}
		s.inflight.wait()
	}
	<-served // http.ErrServerClosed once Shutdown began
	return nil
}

// StopNow ends a shutdown's grace: the requests still in flight are cancelled as when
// Options.ShutdownTimeout runs out. Before Serve's context is done it only shortens the shutdown
// to come. Safe from any goroutine, any number of times.
func (s *Server) StopNow() { s.stopOnce.Do(func() { close(s.stopNow) }) }

// tracker counts the requests being handled.
type tracker struct {
	mu   sync.Mutex
	cond *sync.Cond // on mu: n dropped to 0
	n    int
}

func (t *tracker) enter() {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
}

func (t *tracker) exit() {
	t.mu.Lock()
	if t.n--; t.n == 0 {
		t.cond.Broadcast()
	}
	t.mu.Unlock()
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

func (t *tracker) wait() {
	t.mu.Lock()
	for t.n > 0 {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

// shuttingDown reports whether r's context was cancelled by Serve's shutdown (not by its client).
func shuttingDown(r *http.Request) bool {
	return errors.Is(context.Cause(r.Context()), errShutdown)
}
