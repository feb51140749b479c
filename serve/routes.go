package serve

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// route is one endpoint: the methods it answers and its handler.
type route struct {
	allow  string // the Allow header of a 405
	post   bool   // POST only; else GET and HEAD
	ping   bool   // GET, HEAD and POST (SageMaker's /ping)
	handle func(w http.ResponseWriter, r *http.Request, info *reqInfo)
}

// reqInfo is what a handler tells the request log about its request.
type reqInfo struct {
	id                 string // the reply's id
	stream             bool
	prompt, completion int    // tokens
	finish             string // finish_reason, "cancelled" or "error"
	ttft               time.Duration
}

// Handler returns the server's HTTP handler: the endpoints of the package doc, every error as
// OpenAI's error object.
func (s *Server) Handler() http.Handler {
	routes := map[string]route{
		"/v1/completions":      {allow: "POST", post: true, handle: s.completions},
		"/v1/chat/completions": {allow: "POST", post: true, handle: s.chatCompletions},
		"/v1/models":           {allow: "GET, HEAD", handle: s.models},
		"/tokenize":            {allow: "POST", post: true, handle: s.tokenize},
		"/detokenize":          {allow: "POST", post: true, handle: s.detokenize},
		"/health":              {allow: "GET, HEAD", handle: s.health},
		"/ping":                {allow: "GET, HEAD, POST", ping: true, handle: s.health},
		"/version":             {allow: "GET, HEAD", handle: s.version},
	}
	if s.opts.Metrics != nil {
		h := s.opts.Metrics.Handler()
		routes["/metrics"] = route{allow: "GET, HEAD", handle: func(w http.ResponseWriter, r *http.Request, _ *reqInfo) { h.ServeHTTP(w, r) }}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.enter()
		defer s.inflight.exit()
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		var info reqInfo
		// The key check comes first, as vLLM's authentication wraps its CORS: a refused request
		// gets no CORS headers; a preflight (OPTIONS) passes it.
		if !s.keys.refuse(sw, r) && !s.cors.preflight(sw, r) {
			s.cors.annotate(sw, r)
			s.dispatch(routes, sw, r, &info)
		}
		s.logRequest(r, sw.status, &info, time.Since(start))
	})
}

func (s *Server) dispatch(routes map[string]route, w http.ResponseWriter, r *http.Request, info *reqInfo) {
	rt, ok := routes[r.URL.Path]
	switch {
	case !ok:
		s.writeError(w, newAPIError(http.StatusNotFound, typeInvalid, "", "not_found", "no endpoint %s %s", r.Method, r.URL.Path))
	case rt.ping && r.Method == http.MethodPost:
		rt.handle(w, r, info)
	case rt.post && r.Method != http.MethodPost, !rt.post && r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", rt.allow)
		s.writeError(w, newAPIError(http.StatusMethodNotAllowed, typeInvalid, "", "method_not_allowed",
			"method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rt.allow))
	default:
		rt.handle(w, r, info)
	}
}

// statusWriter remembers the status a handler answered with, for the request log. Unwrap lets
// http.ResponseController reach the connection (flushes, deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logRequest writes the request's line (Options.Log).
func (s *Server) logRequest(r *http.Request, status int, info *reqInfo, took time.Duration) {
	if s.opts.Log == nil {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
		slog.Duration("took", took), slog.String("remote", r.RemoteAddr),
	}
	if info.id != "" {
		attrs = append(attrs, slog.String("id", info.id), slog.Bool("stream", info.stream),
			slog.Int("prompt_tokens", info.prompt), slog.Int("completion_tokens", info.completion),
			slog.String("finish", info.finish))
		if info.ttft > 0 { // a request that ended before its first token has none
			attrs = append(attrs, slog.Duration("ttft", info.ttft))
		}
	}
	s.opts.Log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

// readBody reads a request body within Options.MaxBodyBytes and Options.ReadTimeout. The deadline
// stays after a failed read: net/http reads the rest of an unread body before it answers.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.opts.ReadTimeout)) // best effort: not every writer has deadlines
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err == nil {
		rc.SetReadDeadline(time.Time{}) // a stream may outlast the read deadline: clear it
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, newAPIError(http.StatusRequestEntityTooLarge, typeInvalid, "", "request_too_large",
			"the request body is over the limit of %d bytes", tooBig.Limit)
	case err != nil:
		return nil, badRequest("", "", "reading the request body: %v", err)
	}
	return body, nil
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request, info *reqInfo) {
	s.generate(w, r, info, parseCompletion)
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, info *reqInfo) {
	s.generate(w, r, info, parseChat)
}

// modelList is GET /v1/models' reply (vLLM adds max_model_len).
type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len"`
}

func (s *Server) models(w http.ResponseWriter, r *http.Request, _ *reqInfo) {
	m := s.model
	s.writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{{
		ID: m.ID, Object: "model", Created: m.Created.Unix(), OwnedBy: "rosetop", MaxModelLen: m.MaxSeqLen,
	}}})
}

// version answers GET /version as vLLM does: {"version": ...}, the build's.
func (s *Server) version(w http.ResponseWriter, r *http.Request, _ *reqInfo) {
	v := s.opts.Version
	if v == "" {
		v = "unknown"
	}
	s.writeJSON(w, http.StatusOK, map[string]string{"version": v})
}

// health answers 200 with an empty body while the server takes requests (as vLLM's /health and
// its /ping, SageMaker's probe, GET or POST), 503 once it is shutting down.
func (s *Server) health(w http.ResponseWriter, r *http.Request, _ *reqInfo) {
	if s.draining.Load() {
		s.writeError(w, newAPIError(http.StatusServiceUnavailable, typeServer, "", "shutting_down", "%v", errShutdown))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// writeJSON answers v with status, within Options.WriteTimeout. It flushes, so the reply is on
// the wire when the handler returns (a shutdown closes the connections after the handlers).
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout)) // best effort: not every writer has deadlines
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if json.NewEncoder(w).Encode(v) == nil {
		rc.Flush() // a failed write or flush means the client left: nothing to do
	}
}
