package serve

import (
	"fmt"
	"net/http"
	"strconv"
)

// apiError is an error answered with OpenAI's error object:
// {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	status     int
	Message    string  `json:"message"`
	Type       string  `json:"type"`
	Param      *string `json:"param"`
	Code       *string `json:"code"`
	retryAfter int     // seconds, for 429: the Retry-After header; 0: none
}

func (e *apiError) Error() string { return e.Message }

// OpenAI's error types.
const (
	typeInvalid   = "invalid_request_error"
	typeRateLimit = "rate_limit_error"
	typeServer    = "server_error"
)

func newAPIError(status int, typ, param, code, format string, args ...any) *apiError {
	e := &apiError{status: status, Type: typ, Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	return e
}

// badRequest is a 400 about param (code: "" for none).
func badRequest(param, code, format string, args ...any) *apiError {
	return newAPIError(http.StatusBadRequest, typeInvalid, param, code, format, args...)
}

// errorBody is the JSON of an error response or of an error event in a stream.
type errorBody struct {
	Error *apiError `json:"error"`
}

// writeError answers e with its status; nothing may have been written before.
func (s *Server) writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	s.writeJSON(w, e.status, errorBody{e})
}
