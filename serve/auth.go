package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// apiKeys guards the API as vLLM's --api-key does: a request to a guarded path needs
// "Authorization: Bearer KEY" with one of the keys, else 401 {"error": "Unauthorized"}. Health
// probes and metrics scraping stay open, and so does every OPTIONS (a browser's preflight
// carries no credentials). Immutable after newAPIKeys.
type apiKeys struct {
	sums [][sha256.Size]byte // the keys' SHA-256: compared in constant time, whatever their lengths
}

// newAPIKeys hashes keys; none is nil (the API is open).
func newAPIKeys(keys []string) *apiKeys {
	if len(keys) == 0 {
		return nil
	}
	a := &apiKeys{}
	for _, k := range keys {
		a.sums = append(a.sums, sha256.Sum256([]byte(k)))
	}
	return a
}

// guarded reports whether path needs a key, as vLLM's prefixes say (a plain prefix, no segment
// boundary): its fail-closed floor /v1, /v2, /inference and /cohere, whether a route exists
// there or not, and its other non-public routes (/tokenize, /detokenize); not /health, /ping,
// /version, /metrics.
func guarded(path string) bool {
	for _, p := range [...]string{"/v1", "/v2", "/inference", "/cohere", "/tokenize", "/detokenize"} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// refuse answers 401 and reports true where r needs a key it does not carry; a nil apiKeys
// refuses nothing.
func (a *apiKeys) refuse(w http.ResponseWriter, r *http.Request) bool {
	if a == nil || r.Method == http.MethodOptions || !guarded(r.URL.Path) || a.carried(r) {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte(`{"error":"Unauthorized"}`)) // vLLM's body, not OpenAI's error object
	return true
}

// carried reports whether r's Authorization is "Bearer KEY" (the scheme in any case) with one
// of the keys.
func (a *apiKeys) carried(r *http.Request) bool {
	scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(key))
	match := 0
	for _, s := range a.sums {
		match |= subtle.ConstantTimeCompare(sum[:], s[:])
	}
	return match == 1
}
